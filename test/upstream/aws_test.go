package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/ec2sim"
	"github.com/karpx/karpx/plugin/capacity"
	"github.com/karpx/karpx/plugin/status"
	"github.com/karpx/karpx/test/cluster"
)

// awsEnv is a control plane run by the real Karpenter AWS provider
// against its own ec2sim.
type awsEnv struct {
	upstreamEnv
	sim *ec2sim.Simulator
}

// TestUpstreamKarpenterAWS runs the real Karpenter AWS provider
// (bin/karpenter-aws, `make karpenter-aws`) on one control plane with its
// own ec2sim, its CRDs from its module and its Helm chart's RBAC (running
// as that ServiceAccount, not cluster-admin): a Deployment's pods go
// Running on Nodes of instances it launched through ec2sim's CreateFleet;
// the real `kubectl karpx` status, nodeclaims, explain pod, capacity and
// audit answer from Karpenter's own objects and events; karpx's webhook
// adds startup taints Karpenter honours and denies an unsafe
// EC2NodeClass; and scaling to zero terminates every instance.
func TestUpstreamKarpenterAWS(t *testing.T) {
	start := time.Now()
	e := startAWSEnv(t, 10*time.Minute, "", nil)

	t.Run("Launch", func(t *testing.T) { e.t = t; e.launch() })
	if t.Failed() {
		return
	}
	pluginOnPath(t, e.root)
	t.Run("Plugin", func(t *testing.T) { e.t = t; e.plugin() })
	t.Run("Audit", func(t *testing.T) { e.t = t; e.audit() })
	t.Run("Webhook", func(t *testing.T) { e.t = t; e.webhook() })
	t.Run("ScaleToZero", func(t *testing.T) { e.t = t; e.scaleToZero() })
	t.Logf("TestUpstreamKarpenterAWS took %s; ec2sim calls: %s", time.Since(start).Round(time.Millisecond), formatStats(e.sim.Stats()))
}

// formatStats prints ec2sim's per-action counters in name order.
func formatStats(stats map[string]ec2sim.ActionStats) string {
	names := make([]string, 0, len(stats))
	for n := range stats {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		s := stats[n]
		fmt.Fprintf(&b, "%s=%d", n, s.Requests)
		if s.Errors > 0 {
			fmt.Fprintf(&b, "(%d errors)", s.Errors)
		}
		b.WriteString(" ")
	}
	return strings.TrimSpace(b.String())
}

// launch applies EC2NodeClass default (AL2023) and NodePool general,
// waits until Karpenter has them Ready, creates a three-pod Deployment and
// a pod no instance type can hold, and waits until Karpenter's NodeClaims
// are Initialized and the pods Running on them; each NodeClaim's instance
// is one ec2sim launched through CreateFleet and runs, and its Node is
// that instance's.
func (e *awsEnv) launch() {
	t := e.t
	t0 := time.Now()
	if _, err := e.cluster.Kubectl(e.ctx, []byte(EC2NodeClassYAML("default", e.cluster.Name, "al2023@latest")), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.Create(e.ctx, nodePool("general", "default", nil)); err != nil {
		t.Fatal(err)
	}
	// As a user's NodePool is there before the workloads: Karpenter plans
	// only for Ready NodePools and, for pods that were pending already,
	// only on its next pass (up to about 10 s later).
	e.eventually(2*time.Minute, "NodePool general Ready (EC2NodeClass default validated)", func(ctx context.Context) (bool, error) {
		var np karpv1.NodePool
		return e.kube.Get(ctx, client.ObjectKey{Name: "general"}, &np) == nil && np.StatusConditions().Root().IsTrue(), nil
	})
	t.Logf("EC2NodeClass default and NodePool general Ready in %s", time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	if err := e.kube.Create(e.ctx, deployment("web", 3, "1", nil)); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.Create(e.ctx, deployment("huge", 1, "1000", nil)); err != nil {
		t.Fatal(err)
	}
	e.waitWebRunning()
	claims, err := e.claimsOf(e.ctx, "general")
	if err != nil {
		t.Fatal(err)
	}
	instances := map[string]ec2sim.Instance{}
	for _, in := range e.sim.Instances() {
		instances[in.ID] = in
	}
	for _, nc := range claims {
		id := nc.Status.ProviderID[strings.LastIndex(nc.Status.ProviderID, "/")+1:]
		in, ok := instances[id]
		switch {
		case !ok:
			t.Errorf("NodeClaim %s: providerID %q names no ec2sim instance", nc.Name, nc.Status.ProviderID)
		case in.FleetID == "" || in.State != ec2sim.StateRunning:
			t.Errorf("NodeClaim %s: instance %s in state %s, fleet %q; want running, launched by CreateFleet", nc.Name, id, in.State, in.FleetID)
		case in.NodeName != nc.Status.NodeName || in.InstanceType != nc.Labels[corev1.LabelInstanceTypeStable]:
			t.Errorf("NodeClaim %s (Node %s, %s): instance %s has Node %s, type %s", nc.Name, nc.Status.NodeName, nc.Labels[corev1.LabelInstanceTypeStable], id, in.NodeName, in.InstanceType)
		}
	}
	if fleets := e.sim.Stats()["CreateFleet"]; fleets.Requests-fleets.Errors < int64(len(claims)) {
		t.Errorf("ec2sim answered %d of %d CreateFleet calls for %d NodeClaims", fleets.Requests-fleets.Errors, fleets.Requests, len(claims))
	}
	// The EC2NodeClass passed Karpenter's validation, AL2023's cluster
	// CIDR and bootstrap from ec2sim's EKS DescribeCluster included.
	ready, err := e.cluster.Kubectl(e.ctx, nil, "get", "ec2nodeclass", "default", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	if err != nil || ready != "True" {
		out, _ := e.cluster.Kubectl(e.ctx, nil, "get", "ec2nodeclass", "default", "-o", "jsonpath={.status.conditions}")
		t.Errorf("EC2NodeClass default: Ready %q (%v), conditions %s", ready, err, out)
	}
	for _, nc := range claims {
		t.Logf("NodeClaim %s (%s): created %s after the pods, %s", nc.Name, nc.Labels[corev1.LabelInstanceTypeStable], nc.CreationTimestamp.Sub(t0).Round(time.Second), conditionTimes(&nc))
	}
	t.Logf("%d NodeClaims Initialized and 3 pods Running in %s", len(claims), time.Since(t0).Round(time.Millisecond))
}

// conditionTimes prints when a NodeClaim became Launched, Registered and
// Initialized, after its creation (the API server's second granularity).
func conditionTimes(nc *karpv1.NodeClaim) string {
	var parts []string
	for _, ct := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
		if c := nc.StatusConditions().Get(ct); c != nil && c.IsTrue() {
			parts = append(parts, fmt.Sprintf("%s +%s", ct, c.LastTransitionTime.Sub(nc.CreationTimestamp.Time)))
		}
	}
	return strings.Join(parts, ", ")
}

// plugin runs the real kubectl karpx against the cluster the AWS provider
// runs.
func (e *awsEnv) plugin() {
	t := e.t
	claims, err := e.claimsOf(e.ctx, "general")
	if err != nil || len(claims) == 0 {
		t.Fatalf("NodeClaims of general: %v (%d)", err, len(claims))
	}

	// status: Karpenter's NodePool and NodeClaims, each in the phase its
	// conditions give, and the EC2 API budget named as unknowable (no
	// karpx controller runs here).
	out := e.karpx("status")
	if !strings.Contains(out, "general") {
		t.Errorf("status lacks NodePool general")
	}
	for i := range claims {
		if !rowHas(out, claims[i].Name, status.Phase(&claims[i])) || status.Phase(&claims[i]) != status.PhaseInitialized {
			t.Errorf("status: NodeClaim %s not shown %s (its conditions' phase %s)", claims[i].Name, status.PhaseInitialized, status.Phase(&claims[i]))
		}
	}
	if !strings.Contains(out, status.BudgetUnavailableMessage) {
		t.Errorf("status does not say the EC2 API budget is unavailable")
	}

	// nodeclaims: every NodeClaim, its Node and phase.
	out = e.karpx("nodeclaims")
	for _, nc := range claims {
		if !rowHas(out, nc.Name, status.PhaseInitialized) {
			t.Errorf("nodeclaims: NodeClaim %s not shown %s", nc.Name, status.PhaseInitialized)
		}
	}

	// explain pod: for the pod no type can hold, karpx's own answer (it
	// models a NodePool of the AWS provider: EC2NodeClass, catalogue
	// types) with the largest allocatable, exit status 3 ("no"), and
	// Karpenter's FailedScheduling event beside it; for a running pod,
	// Karpenter's nomination to one of its NodeClaims.
	var huge, web corev1.PodList
	if err := e.kube.List(e.ctx, &huge, client.InNamespace("default"), client.MatchingLabels{"app": "huge"}); err != nil || len(huge.Items) != 1 {
		t.Fatalf("huge pod: %v", err)
	}
	e.eventually(time.Minute, "Karpenter's FailedScheduling event for the huge pod", func(ctx context.Context) (bool, error) {
		var events corev1.EventList
		if err := e.kube.List(ctx, &events, client.InNamespace("default")); err != nil {
			return false, nil
		}
		return slices.ContainsFunc(events.Items, func(ev corev1.Event) bool {
			return ev.InvolvedObject.UID == huge.Items[0].UID && ev.Source.Component == "karpenter" && ev.Reason == "FailedScheduling"
		}), nil
	})
	out, code := e.karpxExit("explain", "pod", huge.Items[0].Name, "-n", "default")
	if code != 3 {
		t.Errorf("explain pod %s: exit %d, want 3 (no NodePool can launch a node for it)", huge.Items[0].Name, code)
	}
	if !rowHas(out, "general", "no", `no compatible instance type in NodePool "general" has room for cpu=1k`) {
		t.Errorf("explain pod %s does not say that no instance type of NodePool general has room for it", huge.Items[0].Name)
	}
	for _, s := range []string{"The autoscaler's latest events for this pod", "karpenter", "FailedScheduling", "Failed to schedule pod"} {
		if !strings.Contains(out, s) {
			t.Errorf("explain pod %s lacks %q", huge.Items[0].Name, s)
		}
	}
	if err := e.kube.List(e.ctx, &web, client.InNamespace("default"), client.MatchingLabels{"app": "web"}); err != nil || len(web.Items) == 0 {
		t.Fatalf("web pods: %v", err)
	}
	out = e.karpx("explain", "pod", web.Items[0].Name, "-n", "default")
	if !strings.Contains(out, "Nominated") || !slices.ContainsFunc(claims, func(nc karpv1.NodeClaim) bool {
		return strings.Contains(out, "Pod should schedule on: nodeclaim/"+nc.Name)
	}) {
		t.Errorf("explain pod %s lacks Karpenter's nomination to one of its NodeClaims", web.Items[0].Name)
	}

	// capacity: no karpx cache here; each NodeClaim against its Node.
	out = e.karpx("capacity")
	if !strings.Contains(out, capacity.NoControllerMessage) {
		t.Errorf("capacity does not say why there is no learned capacity")
	}
	for _, nc := range claims {
		if !rowHas(out, nc.Name, nc.Status.NodeName) {
			t.Errorf("capacity lacks NodeClaim %s on Node %s", nc.Name, nc.Status.NodeName)
		}
	}
}

// auditUnsafeNodeClass is an EC2NodeClass the cluster admits while no karpx
// webhook runs: an AL2023 class whose userData restarts the kubelet
// (KX003). No NodePool uses it.
func auditUnsafeNodeClass(clusterName string) string {
	return strings.Replace(EC2NodeClassYAML("audited", clusterName, "al2023@latest"),
		"spec:\n", "spec:\n  userData: |\n    #!/bin/bash\n    systemctl restart kubelet\n", 1)
}

// audit: `kubectl karpx audit` over the live NodePools and EC2NodeClasses
// of the cluster the AWS provider runs (its CRDs' schemas) finds the
// unsafe EC2NodeClass the API server admitted, names rule and field, and
// exits 1; the class is removed afterwards.
func (e *awsEnv) audit() {
	t := e.t
	if _, err := e.cluster.Kubectl(e.ctx, []byte(auditUnsafeNodeClass(e.cluster.Name)), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := e.cluster.Kubectl(e.ctx, nil, "delete", "ec2nodeclass", "audited", "--wait=false"); err != nil {
			t.Error(err)
		}
	}()
	out, code := e.karpxExit("audit")
	if code != 1 {
		t.Errorf("kubectl karpx audit: exit %d, want 1 (a denial)", code)
	}
	if !rowHas(out, "EC2NodeClass/audited", "deny", "KX003") || !strings.Contains(out, "spec.userData") {
		t.Errorf("kubectl karpx audit lacks the KX003 denial of EC2NodeClass/audited's spec.userData")
	}
	// The NodePool and both EC2NodeClasses of the cluster were read.
	if !strings.Contains(out, "3 object(s) checked: 1 denial(s)") {
		t.Errorf("kubectl karpx audit did not check the cluster's 3 objects with one denial")
	}
}

// karpxExit runs the real `kubectl karpx ARGS` and returns its combined
// output and exit status; it fails the test when kubectl cannot run.
func (e *awsEnv) karpxExit(args ...string) (string, int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"karpx"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.cluster.Kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		e.t.Fatalf("kubectl karpx %s: %v", strings.Join(args, " "), err)
	}
	e.t.Logf("kubectl karpx %s (exit %d):\n%s", strings.Join(args, " "), code, out.String())
	return out.String(), code
}

// webhook installs karpx's webhook beside Karpenter: it adds Cilium's
// startup taints to NodePool agents, Karpenter launches an instance whose
// Node carries them, and an EC2NodeClass that restarts the kubelet is
// denied.
func (e *awsEnv) webhook() {
	t := e.t
	startWebhook(t, e.ctx, e.cluster, e.root)
	if _, err := e.cluster.Kubectl(e.ctx, []byte(ciliumRule), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	agents := nodePool("agents", "agents", map[string]string{"pool": "agents"})
	// The webhook reads the ConfigMap through an informer: wait until a
	// dry run shows the rule in force.
	e.eventually(30*time.Second, "the webhook applying the Cilium rule", func(ctx context.Context) (bool, error) {
		np := agents.DeepCopy()
		if err := e.kube.Create(ctx, np, client.DryRunAll); err != nil {
			return false, nil
		}
		return hasTaint(np.Spec.Template.Spec.StartupTaints, ciliumTaintKey), nil
	})
	if _, err := e.cluster.Kubectl(e.ctx, []byte(EC2NodeClassYAML("agents", e.cluster.Name, "bottlerocket@latest")), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.Create(e.ctx, agents); err != nil {
		t.Fatal(err)
	}
	if !hasTaint(agents.Spec.Template.Spec.StartupTaints, ciliumTaintKey) {
		t.Fatalf("NodePool agents stored without the webhook's startup taints: %+v", agents.Spec.Template.Spec.StartupTaints)
	}
	if err := e.kube.Create(e.ctx, deployment("agent-app", 1, "500m", map[string]string{"pool": "agents"})); err != nil {
		t.Fatal(err)
	}
	var node corev1.Node
	e.eventually(2*time.Minute, "Karpenter's registered Node for NodePool agents", func(ctx context.Context) (bool, error) {
		claims, err := e.claimsOf(ctx, "agents")
		if err != nil || len(claims) == 0 || claims[0].Status.NodeName == "" || !conditionTrue(&claims[0], karpv1.ConditionTypeRegistered) {
			return false, nil
		}
		return e.kube.Get(ctx, client.ObjectKey{Name: claims[0].Status.NodeName}, &node) == nil, nil
	})
	for _, want := range agents.Spec.Template.Spec.StartupTaints {
		if !slices.ContainsFunc(node.Spec.Taints, func(got corev1.Taint) bool { return got.MatchTaint(&want) }) {
			t.Errorf("Node %s lacks startup taint %s: taints %v", node.Name, want.ToString(), node.Spec.Taints)
		}
	}

	_, err := e.cluster.Kubectl(e.ctx, []byte(unsafeNodeClass), "apply", "-f", "-")
	if err == nil || !strings.Contains(err.Error(), `admission webhook "ec2nodeclasses.karpx.io" denied the request`) {
		t.Errorf("the kubelet-restarting EC2NodeClass: %v, want the webhook's denial", err)
	}
	if _, err := e.cluster.Kubectl(e.ctx, []byte(safeNodeClass), "apply", "-f", "-"); err != nil {
		t.Errorf("the safe EC2NodeClass (control): %v", err)
	}
}

// scaleToZero deletes every workload, lets the Cilium agent's taint go
// (as the agent would once running) and sets consolidateAfter to 0s on
// both NodePools: Karpenter removes every NodeClaim and terminates every
// instance, so ec2sim shows none pending or running.
func (e *awsEnv) scaleToZero() {
	t := e.t
	t0 := time.Now()
	for _, name := range []string{"web", "huge", "agent-app"} {
		if _, err := e.cluster.Kubectl(e.ctx, nil, "delete", "deployment", name, "-n", "default", "--ignore-not-found"); err != nil {
			t.Fatal(err)
		}
	}
	var nodes corev1.NodeList
	if err := e.kube.List(e.ctx, &nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: "agents"}); err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		patch := client.MergeFrom(n.DeepCopy())
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == ciliumTaintKey })
		if err := e.kube.Patch(e.ctx, n, patch); err != nil {
			t.Fatal(err)
		}
	}
	for _, pool := range []string{"general", "agents"} {
		if _, err := e.cluster.Kubectl(e.ctx, nil, "patch", "nodepool", pool, "--type=merge", "--patch", `{"spec":{"disruption":{"consolidateAfter":"0s"}}}`); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually(4*time.Minute, "every NodeClaim removed and every instance terminated", func(ctx context.Context) (bool, error) {
		var claims karpv1.NodeClaimList
		if err := e.kube.List(ctx, &claims); err != nil || len(claims.Items) > 0 {
			return false, nil
		}
		return !slices.ContainsFunc(e.sim.Instances(), func(in ec2sim.Instance) bool {
			return in.State == ec2sim.StatePending || in.State == ec2sim.StateRunning
		}), nil
	})
	launched := e.sim.Instances()
	if len(launched) == 0 {
		t.Fatal("ec2sim lists no instance at all after the launches")
	}
	for _, in := range launched {
		if in.TerminationTime == nil {
			t.Errorf("instance %s (%s) is %s with no termination requested", in.ID, in.NodeName, in.State)
		}
	}
	var left corev1.NodeList
	if err := e.kube.List(e.ctx, &left, client.HasLabels{karpv1.NodePoolLabelKey}); err != nil {
		t.Fatal(err)
	}
	if len(left.Items) > 0 {
		t.Errorf("%d Karpenter Nodes left after every instance terminated", len(left.Items))
	}
	t.Logf("%d instances terminated, every NodeClaim gone, %s after the workloads were deleted", len(launched), time.Since(t0).Round(time.Millisecond))
}

// startAWSEnv starts, for t, a control plane, its own ec2sim and the real
// Karpenter AWS provider (bin/karpenter-aws) with FEATURE_GATES=gates, or
// Karpenter's defaults for "", after seed (nil for none) has set up the
// simulator before Karpenter reads it; the env's context ends after
// timeout or with t. It skips with -short and fails t when a part cannot
// start; the cluster, simulator and Karpenter stop with t.
func startAWSEnv(t *testing.T, timeout time.Duration, gates string, seed func(*ec2sim.Simulator)) *awsEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real control plane and bin/karpenter-aws; skipped with -short")
	}
	start := time.Now()
	e, endpoint := startSimEnv(t, timeout)
	if seed != nil {
		seed(e.sim)
	}
	opts := AWSOptions{Endpoint: endpoint}
	if gates != "" {
		opts.Env = []string{"FEATURE_GATES=" + gates}
	}
	k := StartAWSForTest(t, e.cluster, opts)
	t.Logf("control plane, ec2sim and Karpenter AWS %s (FEATURE_GATES %q) ready in %s (Karpenter log: %s)",
		AWSVersion, gates, time.Since(start).Round(time.Millisecond), k.LogPath)
	return e
}

// startSimEnv starts, for t, a control plane and an ec2sim with its
// default settings whose EKS DescribeCluster answers with the control
// plane's endpoint and CA (as Karpenter resolves AL2023's cluster CIDR and
// bootstrap from it), and returns them with ec2sim's URL; no autoscaler
// runs yet. The env's context ends after timeout or with t; its client
// can watch. It fails t when a part cannot start.
func startSimEnv(t *testing.T, timeout time.Duration) (*awsEnv, string) {
	t.Helper()
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	kube, err := client.NewWithWatch(c.RESTConfig, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	sim, endpoint := StartSimForTest(t, c, ec2sim.Config{Kube: kube})
	return &awsEnv{upstreamEnv: upstreamEnv{t: t, ctx: ctx, root: filepath.Dir(bin), cluster: c, kube: kube}, sim: sim}, endpoint
}
