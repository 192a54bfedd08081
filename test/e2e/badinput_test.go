package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// badInputHealthy is the healthy EC2NodeClass and NodePool beside the bad
// objects: m5.large on-demand nodes for the pods labelled tier: healthy.
func badInputHealthy(cluster string) string {
	return manifests(nodeClass{Name: "healthy"}.yaml(cluster), nodePool{Name: "healthy",
		Labels: map[string]string{"tier": "healthy"}, InstanceTypes: []string{"m5.large"}, CapacityTypes: []string{onDemand}}.yaml())
}

// badInputObjects are hostile or malformed objects for cluster, by name,
// each NodePool with the tier label (bad-<name>) its pods select. Some are
// refused by the API server's CRD validation, which is the best outcome;
// the others reach karpx.
func badInputObjects(cluster string) map[string]string {
	bad := func(name string) nodePool {
		return nodePool{Name: "bad-" + name, NodeClass: "healthy", Labels: map[string]string{"tier": "bad-" + name}, CapacityTypes: []string{onDemand}}
	}
	missingClass := bad("missing-nodeclass")
	missingClass.NodeClass = "does-not-exist"
	noType := bad("no-instance-type")
	noType.CapacityTypes, noType.InstanceTypes = nil, []string{"x99.nonexistent"}
	noSubnets := bad("subnets-match-nothing")
	noSubnets.NodeClass, noSubnets.CapacityTypes, noSubnets.InstanceTypes = "bad-subnets", nil, []string{"m5.large"}
	hugeLabel := bad("huge-label")
	hugeLabel.Labels["huge"] = strings.Repeat("x", 4096)
	zero, negative := bad("zero-limits"), bad("negative-limits")
	zero.Limits, negative.Limits = `{cpu: "0"}`, `{cpu: "-5"}`
	return map[string]string{
		"missing-nodeclass": missingClass.yaml(),
		"no-instance-type":  noType.yaml(),
		"subnets-match-nothing": manifests(nodeClass{Name: "bad-subnets",
			SubnetTags: map[string]string{"karpenter.sh/discovery": "no-such-cluster"}}.yaml(cluster), noSubnets.yaml()),
		"huge-label":      hugeLabel.yaml(),
		"zero-limits":     zero.yaml(),
		"negative-limits": negative.yaml(),
	}
}

// launchCalls are the EC2 actions that start or change machines.
var launchCalls = []string{"CreateFleet", "RunInstances", "CreateTags", "TerminateInstances", "CreateLaunchTemplate"}

// TestBadInputCausesNoLaunch applies hostile and malformed objects beside a
// healthy NodePool, each with pending pods that select it: no bad object
// may cause a launch (or any other mutating EC2 call) or a NodeClaim, and
// the healthy pool still provisions.
func TestBadInputCausesNoLaunch(t *testing.T) {
	runInParallel(t)
	e := newEnv(t, "karpx-bad-input")
	e.apply(badInputHealthy(e.name))
	steady := deployment("steady", 1, "1500m", "512Mi")
	steady.Spec.Template.Spec.NodeSelector = map[string]string{"tier": "healthy"}
	if err := e.kube.Create(e.ctx, steady); err != nil {
		t.Fatal(err)
	}
	e.eventually(180*time.Second, "the healthy pod Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "steady") == 1, nil
	})
	// Let the first launch's deferred work (tags, status) settle.
	time.Sleep(3 * time.Second)
	before := e.sim.Stats()

	objects := badInputObjects(e.name)
	var names []string
	for n := range objects {
		names = append(names, n)
	}
	sort.Strings(names)
	var refused []string
	for _, name := range names {
		if _, err := e.cluster.Kubectl(e.ctx, []byte(objects[name]), "apply", "-f", "-"); err != nil {
			refused = append(refused, name)
			t.Logf("API server refused %s: %v", name, firstLine(err.Error()))
		}
		dep := deployment("bad-"+name, 2, "1500m", "512Mi")
		dep.Spec.Template.Spec.NodeSelector = map[string]string{"tier": "bad-" + name}
		if err := e.kube.Create(e.ctx, dep); err != nil {
			t.Fatal(err)
		}
	}
	// Long enough for several provisioning passes and lifecycle retries.
	time.Sleep(20 * time.Second)

	after := e.sim.Stats()
	calls := map[string]int64{}
	var total, launches int64
	for action, st := range after {
		if d := st.Requests - before[action].Requests; d > 0 {
			calls[action] = d
			total += d
		}
	}
	for _, a := range launchCalls {
		launches += calls[a]
	}
	var claims karpv1.NodeClaimList
	if err := e.kube.List(e.ctx, &claims); err != nil {
		t.Fatal(err)
	}
	badClaims := 0
	for _, nc := range claims.Items {
		if nc.Labels[karpv1.NodePoolLabelKey] != "healthy" {
			badClaims++
			t.Errorf("NodeClaim %s for NodePool %s", nc.Name, nc.Labels[karpv1.NodePoolLabelKey])
		}
	}
	if launches != 0 {
		t.Errorf("bad objects caused %d mutating EC2 calls: %v", launches, calls)
	}

	// The healthy pool still provisions.
	if _, err := e.cluster.Kubectl(e.ctx, nil, "scale", "deployment/steady", "--replicas=2"); err != nil {
		t.Fatal(err)
	}
	e.eventually(180*time.Second, "2 healthy pods Running beside the bad objects", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "steady") == 2, nil
	})
	scenarioLogf(t, "bad input: %d objects (%d refused by the API server: %s), 20 s with their pods pending: ec2Calls=%d (launch/mutating=%d) %v badNodeClaims=%d; healthy pool provisioned",
		len(names), len(refused), strings.Join(refused, ","), total, launches, fmtCalls(calls), badClaims)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func fmtCalls(calls map[string]int64) string {
	var parts []string
	for a, n := range calls {
		parts = append(parts, fmt.Sprintf("%s=%d", a, n))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, " ") + "}"
}
