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

const badInputHealthy = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: healthy}
spec:
  role: KarpenterNodeRole-karpx-bad
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: healthy}
spec:
  template:
    metadata: {labels: {tier: healthy}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: healthy}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
`

// badInputObjects are hostile or malformed objects, one per document, each
// with the tier label its pods select. Some are refused by the API
// server's CRD validation, which is the best outcome; the others reach
// karpx.
var badInputObjects = map[string]string{
	"missing-nodeclass": `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bad-missing-nodeclass}
spec:
  template:
    metadata: {labels: {tier: bad-missing-nodeclass}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: does-not-exist}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
`,
	"no-instance-type": `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bad-no-instance-type}
spec:
  template:
    metadata: {labels: {tier: bad-no-instance-type}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: healthy}
      requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [x99.nonexistent]}]
`,
	"subnets-match-nothing": `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: bad-subnets}
spec:
  role: KarpenterNodeRole-karpx-bad
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: no-such-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bad-subnets-match-nothing}
spec:
  template:
    metadata: {labels: {tier: bad-subnets-match-nothing}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: bad-subnets}
      requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}]
`,
	"huge-label": `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bad-huge-label}
spec:
  template:
    metadata: {labels: {tier: bad-huge-label, huge: "` + strings.Repeat("x", 4096) + `"}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: healthy}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
`,
	"zero-limits": `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bad-zero-limits}
spec:
  limits: {cpu: "0"}
  template:
    metadata: {labels: {tier: bad-zero-limits}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: healthy}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
`,
	"negative-limits": `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: bad-negative-limits}
spec:
  limits: {cpu: "-5"}
  template:
    metadata: {labels: {tier: bad-negative-limits}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: healthy}
      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
`,
}

// launchCalls are the EC2 actions that start or change machines.
var launchCalls = []string{"CreateFleet", "RunInstances", "CreateTags", "TerminateInstances", "CreateLaunchTemplate"}

// TestBadInputCausesNoLaunch applies hostile and malformed objects beside a
// healthy NodePool, each with pending pods that select it: no bad object
// may cause a launch (or any other mutating EC2 call) or a NodeClaim, and
// the healthy pool still provisions.
func TestBadInputCausesNoLaunch(t *testing.T) {
	e := newEnv(t, "karpx-bad-input")
	if _, err := e.cluster.Kubectl(e.ctx, []byte(strings.ReplaceAll(badInputHealthy, "CLUSTER", e.name)), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
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

	var names []string
	for n := range badInputObjects {
		names = append(names, n)
	}
	sort.Strings(names)
	var refused []string
	for _, name := range names {
		manifest := strings.ReplaceAll(badInputObjects[name], "CLUSTER", e.name)
		if _, err := e.cluster.Kubectl(e.ctx, []byte(manifest), "apply", "-f", "-"); err != nil {
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
