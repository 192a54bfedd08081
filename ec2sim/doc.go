// Package ec2sim is an in-memory Amazon EC2 endpoint for testing node
// autoscalers without AWS. It speaks the real EC2 Query wire protocol (API
// version 2016-11-15, XML answers and errors), the SSM Parameter Store
// GetParameter JSON protocol and Amazon SQS (AWS JSON 1.0, standard queues)
// on one HTTP handler, so unmodified
// aws-sdk-go-v2 clients, retryer and retry quota included, talk to it through
// BaseEndpoint. It knows the 1,363 instance types of the karpx catalogue,
// launches instances through CreateFleet (Type=instant) and RunInstances,
// throttles like EC2 (per-account token buckets, RequestLimitExceeded),
// injects faults (errors, latency, insufficient capacity per pool), counts
// calls (/_sim/counts, Prometheus /metrics) and, given a controller-runtime
// client, emulates kubelet: running instances register Nodes the way
// Karpenter-bootstrapped nodes do, scriptable per instance through user data
// markers or tags (see Behavior). With Config.InterruptionQueue it feeds an
// SQS queue the way Karpenter's EventBridge rules do: a state-change
// notification for every instance transition, and on demand (Interrupt)
// spot interruption warnings that reclaim the instance after the notice,
// rebalance recommendations and AWS Health scheduled changes (events.go,
// interruptions.go). Create one with New, then Start it on a
// loopback address, or serve Handler yourself and call Run. The actions and
// their throttling and fault hooks are listed in actions.go.
package ec2sim
