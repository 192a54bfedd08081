// Package budgetstatus declares the JSON the controller's client-side EC2
// API budget serves at Path (budget.Limiter's Snapshot and Handler) and
// `kubectl karpx throttle` and `status` decode: one declaration for both
// ends. It imports only the standard library and catalog/awsquota, so the
// plugin decodes it without linking the AWS SDK that package budget wraps
// (test/architecture checks both).
package budgetstatus
