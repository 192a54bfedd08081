// Package awsquota is AWS's request-rate table as karpx knows it: the
// token bucket (size in requests, refill rate in requests per second) of
// every throttling category, and the category each AWS action is charged
// to. It is the one place these figures live: the client-side budget
// (autoscaler/aws/budget) scales them to karpx's share, and the EC2
// simulator (ec2sim) throttles with them, so the two cannot drift.
//
// Sources: EC2, "Request throttling for the Amazon EC2 API", Amazon EC2
// Developer Guide, section "Request token bucket sizes and refill rates"
// (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html);
// SSM, "AWS Systems Manager endpoints and quotas", AWS General Reference
// (Parameter Store GetParameter throughput); SQS, see the SQS* constants.
//
// The package is a leaf: it imports nothing of karpx and no AWS SDK, so the
// controller, the simulator and the plugin can all read it.
package awsquota
