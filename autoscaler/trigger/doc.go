// Package trigger turns watch events into passes of the controllers that
// plan the whole cluster at once (provisioning, disruption). Such a
// controller does not reconcile one object per event: it runs one pass over
// the current state, and an event only says "run a pass soon".
//
// A Trigger is that wake-up: firing never blocks, and every fire that
// arrives while the controller is busy folds into one pass. A controller
// that batches (provisioning) also waits, after the first wake-up, until no
// new object has fired for an idle duration or a maximum has passed; an
// object that fires again in the same window does not extend it. Reconciler
// and Deletions are the controller-runtime glue of the watches that fire
// it.
//
// It owns no controller logic and must not import any controller, cloud
// provider or scheduling package.
package trigger
