// Package hydration tracks the cloud data sets the autoscaler's controllers
// depend on (instance types, offerings, spot prices, subnets, security
// groups, AMIs) and keeps controllers from acting before their data is
// loaded (problem P2: "no instance types found" right after a start).
//
// A Registry holds one State per data set: hydrated at, item count, last
// error. Providers report each refresh with Succeeded or Failed; a
// Hydrator (a manager.Runnable on every replica) loads the Sources at start,
// retrying transient failures with backoff, and refreshes them on a period.
// After wraps a leader-elected Runnable so that it starts only once the
// data sets it declares are hydrated; the Registry is also a /readyz check
// and serves its states as JSON for `kubectl karpx status`.
//
// Errors are typed: *NotHydratedError (and any AWS throttling, 5xx or
// timeout) is transient and retried; a selector that matches nothing or
// requirements no instance type satisfies are persistent and reported as
// conditions and events by their controllers.
package hydration
