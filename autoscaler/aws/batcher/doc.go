// Package batcher merges concurrent EC2 calls that can be answered by one
// call: CreateFleet requests with the same launch configuration,
// DescribeInstances by instance ids and TerminateInstances.
//
// Batcher is the generic part: requests with equal keys join an open batch,
// which closes BatcherOptions.IdleTimeout after its last request,
// MaxTimeout after its first, or when it holds MaxItems items, and then
// runs as one call whose results are split between the callers. A caller
// whose context ends stops waiting; the batch still runs for the others.
//
// API is an ec2api.API built on three Batchers (createfleet.go,
// describeinstances.go, terminateinstances.go); every other call passes
// through. The windows and caps, and their reasons, are the constants in
// api.go. Place it above the client-side budget, so a merged call takes
// one token:
//
//	callers → batcher.New → ec2api.Client (budget.Limiter on its stack)
//
// A merged call runs with the highest cloudprovider.Priority of its
// callers and the other context values of its first caller. A merged
// CreateFleet launches without the per-NodeClaim tags
// (Options.DeferredTagKeys); each caller gets its instances as soon as
// the fleet answers, and their tags follow with one CreateTags call per
// caller in the background (API.WaitTagged waits for those; API.Stop
// ends them).
package batcher
