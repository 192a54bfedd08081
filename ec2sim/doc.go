// Package ec2sim is an in-memory Amazon EC2 endpoint for testing node
// autoscalers without AWS. It speaks the real EC2 Query wire protocol (API
// version 2016-11-15, XML answers and errors), the SSM Parameter Store
// GetParameter JSON protocol, Amazon SQS (AWS JSON 1.0, standard queues),
// the IAM instance-profile actions (Query), EKS DescribeCluster
// (REST-JSON) and the Price List API's GetProducts (AWS JSON 1.1) on one
// HTTP handler, so karpx and the real Karpenter AWS provider, unmodified
// aws-sdk-go-v2 clients, retryer and retry quota included, talk to it through
// BaseEndpoint. It knows the 1,363 instance types of the karpx catalogue,
// launches instances through CreateFleet (Type=instant) and RunInstances,
// throttles like EC2 (per-account token buckets, RequestLimitExceeded),
// injects faults (errors, latency, insufficient capacity per pool), counts
// calls (/_sim/counts, Prometheus /metrics) and, given a controller-runtime
// client, emulates kubelet: running instances register Nodes with the
// labels and taints their user data gives kubelet (nodeadm NodeConfig,
// bootstrap.sh, Bottlerocket TOML; registration.go), scriptable per
// instance through user data markers or tags (see Behavior); their status
// checks fail on demand (FailStatusChecks). With Config.InterruptionQueue it feeds an
// SQS queue the way Karpenter's EventBridge rules do: a state-change
// notification for every instance transition, and on demand (Interrupt)
// spot interruption warnings that reclaim the instance after the notice,
// rebalance recommendations and AWS Health scheduled changes (events.go,
// interruptions.go). Create one with New, then Start it on a
// loopback address, or serve Handler yourself and call Run. The actions and
// their throttling and fault hooks are listed in actions.go.
package ec2sim
