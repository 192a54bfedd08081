package ec2sim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Node condition faults: a scenario makes the Node of an instance report a
// bad condition and keep reporting it, as a broken kubelet (Ready False or
// Unknown) or the EKS node monitoring agent (AcceleratedHardwareReady,
// StorageReady, NetworkingReady, KernelReady, ContainerRuntimeReady False)
// does, so that node repair has something to repair. The kubelet emulation
// (Reconcile) posts the condition on every pass until ClearNodeConditions,
// because kwok, which plays kubelet for Nodes annotated
// kwok.x-k8s.io/node=fake, rewrites the conditions it manages: a fault on
// Ready takes the Node from kwok first (takeFromKwok), as a
// kubelet that stops posting status; a fault on any other type leaves the
// Node to kwok (Ready stays True and its pods keep running), since kwok
// does not touch condition types it does not post.

// NodeConditionFault is one condition the Nodes of InstanceIDs report.
type NodeConditionFault struct {
	// InstanceIDs are the instances, at least one, every one known. A
	// fault on an instance whose Node has not joined yet is posted once it
	// joins.
	InstanceIDs []string `json:"instanceIds"`
	// Type is the condition type, e.g. "Ready" or "NetworkingReady".
	Type corev1.NodeConditionType `json:"type"`
	// Status is "True", "False" or "Unknown"; Ready=True is refused (it
	// is the healthy state: clear the fault instead).
	Status corev1.ConditionStatus `json:"status"`
	// Reason and Message are the condition's; default "SimulatedFault"
	// and a message naming the simulator.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Since is the condition's lastTransitionTime: when the Node started
	// reporting it. Zero means now (the simulator's clock); it must not be
	// in the future. A scenario that starts observing a Node already
	// broken for a while sets it in the past.
	Since time.Time `json:"since,omitempty"`
}

// SetNodeCondition makes the Nodes of f's instances report f's condition
// (replacing an earlier fault of the same type) until ClearNodeConditions.
// It returns an error naming the field to fix, or wrapping
// ErrUnknownInstance for an id the simulator does not know; then nothing
// changes.
func (s *Simulator) SetNodeCondition(f NodeConditionFault) error {
	now := s.clock.Now()
	switch {
	case len(f.InstanceIDs) == 0:
		return errors.New("ec2sim: node condition fault: instanceIds is empty; name at least one instance")
	case f.Type == "":
		return errors.New(`ec2sim: node condition fault: type is empty; set it to the condition type, e.g. "Ready" or "NetworkingReady"`)
	case f.Status != corev1.ConditionTrue && f.Status != corev1.ConditionFalse && f.Status != corev1.ConditionUnknown:
		return fmt.Errorf(`ec2sim: node condition fault: status %q: want "True", "False" or "Unknown"`, f.Status)
	case f.Type == corev1.NodeReady && f.Status == corev1.ConditionTrue:
		return errors.New("ec2sim: node condition fault: Ready=True is the healthy state; clear the fault (ClearNodeConditions) instead")
	case f.Since.After(now):
		return fmt.Errorf("ec2sim: node condition fault: since %s is after the simulator's now %s; leave it empty for now",
			f.Since.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if f.Since.IsZero() {
		f.Since = now
	}
	if f.Reason == "" {
		f.Reason = "SimulatedFault"
	}
	if f.Message == "" {
		f.Message = fmt.Sprintf("ec2sim: %s=%s injected", f.Type, f.Status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range f.InstanceIDs {
		if s.instances[id] == nil {
			return fmt.Errorf("ec2sim: node condition fault: %w %s", ErrUnknownInstance, id)
		}
	}
	for _, id := range f.InstanceIDs {
		in := s.instances[id]
		one := f
		one.InstanceIDs = []string{id}
		kept := in.conditionFaults[:0:0]
		for _, old := range in.conditionFaults {
			if old.Type != f.Type {
				kept = append(kept, old)
			}
		}
		in.conditionFaults = append(kept, one)
		if f.Type == corev1.NodeReady {
			// The kubelet's own ready step must not hand the Node back
			// to kwok while the fault holds (ClearNodeConditions undoes).
			in.node.ready = true
		}
		s.log.Info("Node condition fault", "instanceID", id, "type", f.Type, "status", f.Status, "since", f.Since.UTC().Format(time.RFC3339))
	}
	return nil
}

// ClearNodeConditions ends the node condition faults of the instances ids
// (every instance when none is given); unknown ids are ignored. A Node
// whose Ready was faulted goes back to the kubelet emulation, as a kubelet
// that restarts (kwok's annotation, and Ready with Config.MarkReady); a
// condition of another type keeps the value last posted, as when a node
// monitoring agent stops reporting.
func (s *Simulator) ClearNodeConditions(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(ids) == 0 {
		ids = s.order
	}
	for _, id := range ids {
		in := s.instances[id]
		if in == nil {
			continue
		}
		for _, f := range in.conditionFaults {
			if f.Type == corev1.NodeReady {
				in.node.ready = false // the next pass hands the Node back (markNodeReady)
			}
		}
		in.conditionFaults = nil
	}
}

// conditionTask is one Node's faults, copied under the lock.
type conditionTask struct {
	id, node string
	faults   []NodeConditionFault
}

// reconcileNodeConditions posts the node condition faults of every
// running instance whose Node joined; Reconcile calls it on every pass.
// It returns the Kubernetes API errors (the next pass retries).
func (s *Simulator) reconcileNodeConditions(ctx context.Context, now time.Time) error {
	if s.cfg.Kube == nil {
		return nil
	}
	var tasks []conditionTask
	s.mu.Lock()
	for _, id := range s.order {
		in := s.instances[id]
		if len(in.conditionFaults) == 0 || in.node.name == "" || in.node.deleted || in.state(now, &s.cfg) != StateRunning {
			continue
		}
		tasks = append(tasks, conditionTask{id: id, node: in.node.name, faults: append([]NodeConditionFault(nil), in.conditionFaults...)})
	}
	s.mu.Unlock()
	var errs []error
	for _, t := range tasks {
		if err := s.postNodeConditions(ctx, t.node, t.faults, now); err != nil {
			errs = append(errs, fmt.Errorf("node condition fault on %s (%s): %w", t.node, t.id, err))
		}
	}
	return errors.Join(errs...)
}

// postNodeConditions writes faults onto the Node name: for a Ready fault
// it first removes kwok's annotation, then it sets each condition whose
// status, reason, message or lastTransitionTime differs or whose
// heartbeat is heartbeatEvery old (a strategic merge patch keyed by type,
// so kwok's own conditions are left alone).
func (s *Simulator) postNodeConditions(ctx context.Context, name string, faults []NodeConditionFault, now time.Time) error {
	node := &corev1.Node{}
	if err := s.cfg.Kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	for _, f := range faults {
		if f.Type == corev1.NodeReady {
			if _, err := s.takeFromKwok(ctx, node); err != nil {
				return err
			}
		}
	}
	base := node.DeepCopy()
	changed := false
	for _, f := range faults {
		want := corev1.NodeCondition{Type: f.Type, Status: f.Status, Reason: f.Reason, Message: f.Message,
			LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(f.Since)}
		i := conditionIndex(node.Status.Conditions, f.Type)
		if i < 0 {
			node.Status.Conditions = append(node.Status.Conditions, want)
			changed = true
			continue
		}
		c := &node.Status.Conditions[i]
		if c.Status != want.Status || c.Reason != want.Reason || c.Message != want.Message || !c.LastTransitionTime.Time.Equal(want.LastTransitionTime.Time.Truncate(time.Second)) ||
			now.Sub(c.LastHeartbeatTime.Time) >= heartbeatEvery {
			*c = want
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return s.cfg.Kube.Status().Patch(ctx, node, client.StrategicMergeFrom(base))
}

// heartbeatEvery is how often a faulted condition's lastHeartbeatTime is
// posted again: kubelet's default --node-status-update-frequency (10s,
// Kubernetes' kubelet configuration reference). A kubelet that reports
// Ready=False is alive and keeps posting, so kube-controller-manager does
// not turn the condition to Unknown for a missed heartbeat.
const heartbeatEvery = 10 * time.Second

// conditionIndex is the index of the condition of type t, or -1.
func conditionIndex(conds []corev1.NodeCondition, t corev1.NodeConditionType) int {
	for i := range conds {
		if conds[i].Type == t {
			return i
		}
	}
	return -1
}

// registerNodeConditionAdmin serves the node condition fault hook:
//
//	POST   /_sim/node-conditions   NodeConditionFault → 204; 404 unknown instance, 400 otherwise
//	DELETE /_sim/node-conditions   every fault ends (?instanceId=i-... for some)
func (s *Simulator) registerNodeConditionAdmin(mux *http.ServeMux) {
	mux.HandleFunc("/_sim/node-conditions", instanceFaultAdmin(s.SetNodeCondition, s.ClearNodeConditions))
}
