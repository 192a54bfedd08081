// Package budget keeps karpx's EC2 and SSM calls within a client-side
// share of AWS's request rate limits, so that no burst of work (a
// launch-failure retry storm, a scale-up of a thousand nodes, a catalogue
// refresh) can drain the account's token buckets and make the SDK fail with
// "failed to get rate limit token, retry quota exceeded".
//
// New returns a Limiter; its AddToStack goes in ec2api.Config.APIOptions,
// which puts it on the middleware stack of the EC2 and SSM SDK clients
// (middleware.go). Before every call of an operation of ec2api.API, and
// before every retry the SDK's standard retryer makes, the call takes a
// token from a client-side token bucket (golang.org/x/time/rate). Like EC2,
// which evaluates each action individually, there is one bucket per action,
// sized by the action's throttling category at Options.Fraction (default
// 0.5) of AWS's documented size and refill rate, both read from
// catalog/awsquota, the table the EC2 simulator throttles with too;
// DescribeInstances and DescribeSecurityGroups called without filters, ids
// or MaxResults use a second, smaller bucket, as EC2 does.
//
// A call that finds its bucket empty waits according to its priority, set
// on the context with cloudprovider.WithPriority (the seam's, so that the
// cloud-neutral controllers mark their calls without importing this
// package): PriorityCritical calls are served first, PriorityNormal calls
// (the default for an unmarked context) next; both wait as long as their
// context allows. Within a priority, calls are served in arrival order,
// except that a CreateFleet or TerminateInstances call counts
// InstanceHeadStart earlier for each instance beyond its first (up to
// MaxHeadStart): the batcher's merged launches go before single ones
// queued a little earlier. PrioritySpeculative calls (catalogue
// and spot price refreshes) never dig into the last
// Options.SpeculativeReserve of a bucket and fail fast with *ExhaustedError
// when they would wait longer than Options.SpeculativeMaxWait, so they
// cannot starve the others.
//
// The Limiter counts, per action, requests, errors by AWS code, throttled
// answers, SDK retries (its Finalize middleware, placed after the SDK's
// retry middleware, sees every attempt), client-side wait and retry-quota
// errors, as Prometheus metrics (Metric* constants) on Options.Registerer
// and as a JSON Status from Snapshot, served by Handler at HandlerPath.
//
// Order: callers → batcher → ec2api.Client, with the Limiter on the
// client's stack. The batcher merges calls first, so a merged call takes
// one token.
//
// The package must not import controllers, the operator or ec2sim.
package budget
