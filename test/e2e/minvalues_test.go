package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/ec2sim"
)

// minValuesManifests: a NodePool allowing three m5 sizes with minValues 3
// on the instance type. A 500m pod fits all three (minValues met); a 3-CPU
// pod fits only m5.xlarge and m5.2xlarge (m5.large has 2 vCPUs), so its
// NodeClaim can keep 2 types, fewer than minValues.
var minValuesManifests = nodePool{Name: "flexible", NodeClass: "default", Requirements: []string{
	inRequirement("karpenter.sh/capacity-type", onDemand),
	"{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge, m5.2xlarge], minValues: 3}",
}}.yaml()

// TestMinValues: on the real API server, under the default Strict
// --min-values-policy, a pod that only two of a NodePool's instance types
// fit while its minValues is 3 gets no NodeClaim and a FailedProvisioning
// event naming the minValues; a pod all three fit gets a NodeClaim whose
// CreateFleet offers EC2 at least 3 distinct instance types, annotated
// karpenter.sh/nodeclaim-min-values-relaxed "false" as Karpenter writes it.
// The same autoscaler restarted with BestEffort launches the first pod:
// its NodeClaim keeps minValues 2, is annotated "true", and the pod runs.
func TestMinValues(t *testing.T) {
	e := newBareEnv(t, "karpx-minvalues")
	stop := e.startAutoscaler(e.log.WithName("karpx-strict"), nil)
	e.apply(ec2NodeClassYAML("default", e.name), minValuesManifests)

	// Strict, unsatisfiable: no NodeClaim, an event naming the minValues.
	if err := e.kube.Create(e.ctx, deployment("big", 1, "3", "1Gi")); err != nil {
		t.Fatal(err)
	}
	const want = `requires minValues 3 for node.kubernetes.io/instance-type but only 2 value(s) fit`
	e.eventually(60*time.Second, "a FailedProvisioning event on the big pod naming minValues", func(ctx context.Context) (bool, error) {
		msg, err := podEvent(ctx, e.kube, "big-", "FailedProvisioning")
		return strings.Contains(msg, want), err
	})
	if ncs := e.nodeClaims(); len(ncs) != 0 || e.sim.Counts()["CreateFleet"] != 0 {
		t.Fatalf("Strict: %d NodeClaims, %d CreateFleet calls for a pod minValues excludes; want none", len(ncs), e.sim.Counts()["CreateFleet"])
	}

	// Strict, satisfiable: at least minValues types offered to EC2.
	if err := e.kube.Create(e.ctx, deployment("small", 1, "500m", "512Mi")); err != nil {
		t.Fatal(err)
	}
	e.eventually(90*time.Second, "the small pod Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "small") == 1, nil
	})
	ncs := e.nodeClaims()
	if len(ncs) != 1 {
		t.Fatalf("%d NodeClaims after the small pod ran, want 1 (the big pod must stay without one)", len(ncs))
	}
	checkMinValuesClaim(t, ncs[0], "false", 3)
	calls := e.sim.Calls("CreateFleet")
	if len(calls) != 1 {
		t.Fatalf("%d CreateFleet calls, want 1", len(calls))
	}
	if types := fleetTypes(calls[0]); len(types) < 3 {
		t.Errorf("CreateFleet offered %d distinct instance types %v, want at least minValues 3", len(types), types)
	}
	if countRunning(e.ctx, e.kube, "big") != 0 {
		t.Error("the big pod runs under Strict")
	}
	scenarioLogf(t, "scenario minValues Strict: big pod refused (%q), small pod's CreateFleet offered %v", want, fleetTypes(calls[0]))

	// BestEffort: the big pod launches with minValues relaxed to 2.
	stop()
	e.startAutoscaler(e.log.WithName("karpx-besteffort"), func(o *operator.Options) {
		o.MinValuesPolicy = string(scheduling.MinValuesPolicyBestEffort)
	})
	e.eventually(90*time.Second, "the big pod Running under BestEffort", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "big") == 1, nil
	})
	var relaxed []karpv1.NodeClaim
	for _, nc := range e.nodeClaims() {
		if nc.Name != ncs[0].Name {
			relaxed = append(relaxed, nc)
		}
	}
	if len(relaxed) != 1 {
		t.Fatalf("%d new NodeClaims under BestEffort, want 1", len(relaxed))
	}
	checkMinValuesClaim(t, relaxed[0], "true", 2)
	calls = e.sim.Calls("CreateFleet")
	if got := fleetTypes(calls[len(calls)-1]); !slices.Equal(got, []string{"m5.2xlarge", "m5.xlarge"}) {
		t.Errorf("relaxed CreateFleet offered %v, want the 2 types that fit: m5.2xlarge, m5.xlarge", got)
	}
	scenarioLogf(t, "scenario minValues BestEffort: NodeClaim %s relaxed to minValues 2, CreateFleet offered %v", relaxed[0].Name, fleetTypes(calls[len(calls)-1]))
}

// checkMinValuesClaim checks a NodeClaim's karpenter.sh/nodeclaim-min-values-relaxed
// annotation and the minValues of its instance-type requirement.
func checkMinValuesClaim(t *testing.T, nc karpv1.NodeClaim, relaxed string, minValues int) {
	t.Helper()
	if got, ok := nc.Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey]; !ok || got != relaxed {
		t.Errorf("NodeClaim %s: %s = %q (set %t), want %q", nc.Name, karpv1.NodeClaimMinValuesRelaxedAnnotationKey, got, ok, relaxed)
	}
	for _, r := range nc.Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable {
			if r.MinValues == nil || *r.MinValues != minValues || len(r.Values) < minValues {
				t.Errorf("NodeClaim %s: instance-type requirement %+v, want minValues %d and at least that many values", nc.Name, r, minValues)
			}
			return
		}
	}
	t.Errorf("NodeClaim %s has no %s requirement", nc.Name, corev1.LabelInstanceTypeStable)
}

// fleetTypes returns the distinct instance types of a CreateFleet call's
// overrides, sorted.
func fleetTypes(c ec2sim.Call) []string {
	var types []string
	for _, o := range c.Overrides {
		if !slices.Contains(types, o.InstanceType) {
			types = append(types, o.InstanceType)
		}
	}
	slices.Sort(types)
	return types
}

// nodeClaims lists every NodeClaim.
func (e *env) nodeClaims() []karpv1.NodeClaim {
	e.t.Helper()
	var list karpv1.NodeClaimList
	if err := e.kube.List(e.ctx, &list); err != nil {
		e.t.Fatal(err)
	}
	return list.Items
}

// podEvent returns the message of the newest event with reason on a pod in
// namespace default whose name starts with prefix, or "" when there is none.
func podEvent(ctx context.Context, kube client.Client, prefix, reason string) (string, error) {
	var evs corev1.EventList
	if err := kube.List(ctx, &evs, client.InNamespace("default")); err != nil {
		return "", fmt.Errorf("listing events: %w", err)
	}
	var msg string
	var last time.Time
	for _, ev := range evs.Items {
		at := ev.LastTimestamp.Time
		if at.IsZero() {
			at = ev.EventTime.Time
		}
		if ev.InvolvedObject.Kind == "Pod" && strings.HasPrefix(ev.InvolvedObject.Name, prefix) && ev.Reason == reason && !at.Before(last) {
			msg, last = ev.Message, at
		}
	}
	return msg, nil
}
