package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/operator"
)

// karpenterMetricsManifests: a NodePool of m5.large (2 vCPU, 8 GiB)
// on-demand nodes with limits, and a NodePool whose EC2NodeClass does not
// exist (GetInstanceTypes for it fails with
// NodeClassNotReadyError, which karpenter_cloudprovider_errors_total counts).
func karpenterMetricsManifests(cluster string) string {
	return manifests(nodeClass{Name: "metrics"}.yaml(cluster),
		nodePool{Name: "metrics", Limits: `{cpu: "20", memory: 80Gi}`, InstanceTypes: []string{"m5.large"}, CapacityTypes: []string{onDemand}}.yaml(),
		nodePool{Name: "metrics-missing-class", NodeClass: "does-not-exist", Labels: map[string]string{"tier": "never"},
			Requirements: []string{inRequirement("tier", "never")}}.yaml())
}

// TestKarpenterMetricsAfterProvisioningAndScaleToZero: a dashboard or
// alert written for Karpenter v1.13.0 works against karpx. A running
// controller is scraped on /metrics after a provisioning (3 pods of
// 1500m → 3 m5.large NodeClaims) and after a disruption (the Deployment
// scaled to zero: disruption deletes every NodeClaim); each karpenter_*
// family karpx exports must be there with exactly Karpenter's label keys,
// Karpenter's label values, and values that match what happened. Counters
// are compared with a scrape taken before the pods exist (the registry is
// the process's, shared with the tests before).
func TestKarpenterMetricsAfterProvisioningAndScaleToZero(t *testing.T) {
	addr := freeAddr(t)
	e := newEnvWithLog(t, "karpx-metrics", func(o *operator.Options) {
		o.MetricsBindAddress = addr
		o.BatchMaxDuration = 2 * time.Second
	}, nil)
	// /metrics is authenticated by default (--metrics-secure): scraped as
	// a ServiceAccount bound to karpx-metrics-reader.
	url, token := "https://"+addr+"/metrics", e.metricsReaderToken()
	e.apply(karpenterMetricsManifests(e.name))
	var base scrape
	e.eventually(30*time.Second, "cluster state synced on /metrics", func(ctx context.Context) (bool, error) {
		s, err := scrapeAll(ctx, url, token)
		base = s
		return err == nil && s.value("karpenter_cluster_state_synced", nil) == 1, nil
	})

	const replicas = 3
	dep := deployment("metrics", replicas, "1500m", "1Gi")
	dep.Spec.Template.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "metrics"}
	if err := e.kube.Create(e.ctx, dep); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.eventually(40*time.Second, "3 pods Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "metrics") == replicas, nil
	})
	var ncs karpv1.NodeClaimList
	if err := e.kube.List(e.ctx, &ncs); err != nil {
		t.Fatal(err)
	}
	n := float64(len(ncs.Items))
	if n != replicas {
		t.Fatalf("%d NodeClaims for %d pods of 1500m on m5.large (2 vCPU), want one each", len(ncs.Items), replicas)
	}
	pool := map[string]string{"nodepool": "metrics"}
	var up scrape
	defer func() {
		if t.Failed() {
			t.Logf("last scrape: usage cpu %v, node_count %v, pod startups %v → %v", up.value("karpenter_nodepools_usage", with(pool, "resource_type", "cpu")),
				up.value("karpenter_cluster_state_node_count", nil), base.value("karpenter_pods_startup_duration_seconds_count", nil),
				up.value("karpenter_pods_startup_duration_seconds_count", nil))
			for _, x := range up {
				if strings.HasPrefix(x.name, "karpenter_") && !strings.HasSuffix(x.name, "_bucket") {
					t.Logf("  %s%v %v", x.name, x.labels, x.value)
				}
			}
		}
	}()
	e.eventually(30*time.Second, "NodePool usage, node count and pod startups on /metrics", func(ctx context.Context) (bool, error) {
		s, err := scrapeAll(ctx, url, token)
		up = s
		return err == nil && s.value("karpenter_nodepools_usage", with(pool, "resource_type", "cpu")) == 2*n &&
			s.value("karpenter_cluster_state_node_count", nil) == n &&
			s.value("karpenter_pods_startup_duration_seconds_count", nil)-base.value("karpenter_pods_startup_duration_seconds_count", nil) >= replicas, nil
	})
	elapsed := time.Since(start).Seconds()
	scenarioLogf(t, "scenario metrics: %d NodeClaims; scraped %d karpenter_* series after provisioning", len(ncs.Items), up.count("karpenter_"))

	up.expectKeys(t, "karpenter_nodeclaims_created_total", "min_values_relaxed", "nodepool", "reason")
	up.expectDelta(t, base, "karpenter_nodeclaims_created_total", map[string]string{"reason": "provisioned", "nodepool": "metrics", "min_values_relaxed": "false"}, n)
	up.expectKeys(t, "karpenter_pods_startup_duration_seconds", "quantile")
	up.expectKeys(t, "karpenter_pods_startup_duration_seconds_count")
	if avg := (up.value("karpenter_pods_startup_duration_seconds_sum", nil) - base.value("karpenter_pods_startup_duration_seconds_sum", nil)) /
		(up.value("karpenter_pods_startup_duration_seconds_count", nil) - base.value("karpenter_pods_startup_duration_seconds_count", nil)); avg <= 0 || avg > elapsed+1 {
		t.Errorf("mean pod startup %.2fs, want within (0, %.1fs] (the time the pods took)", avg, elapsed+1)
	}
	up.expectKeys(t, "karpenter_nodepools_usage", "nodepool", "resource_type")
	up.expectKeys(t, "karpenter_nodepools_limit", "nodepool", "resource_type")
	up.expectValue(t, "karpenter_nodepools_usage", with(pool, "resource_type", "memory"), 3*8*(1<<30)) // 3 × m5.large 8 GiB
	up.expectValue(t, "karpenter_nodepools_limit", with(pool, "resource_type", "cpu"), 20)
	up.expectValue(t, "karpenter_nodepools_limit", with(pool, "resource_type", "memory"), 80*(1<<30))
	for _, name := range []string{"karpenter_scheduler_scheduling_duration_seconds", "karpenter_provisioner_scheduling_duration_seconds"} {
		up.expectKeys(t, name+"_bucket", "controller", "le")
		if d := up.value(name+"_count", map[string]string{"controller": "provisioner"}) - base.value(name+"_count", map[string]string{"controller": "provisioner"}); d < 1 {
			t.Errorf("%s_count{controller=provisioner} grew by %v, want ≥ 1", name, d)
		}
		// Karpenter's DurationBuckets: 45 bounds and +Inf.
		if b := up.series(name+"_bucket", map[string]string{"controller": "provisioner"}); len(b) != 46 {
			t.Errorf("%s has %d buckets, want Karpenter's 46", name, len(b))
		}
	}
	up.expectValue(t, "karpenter_cluster_state_synced", nil, 1)
	up.expectKeys(t, "karpenter_cluster_state_synced")
	up.expectKeys(t, "karpenter_cluster_state_node_count")
	up.expectKeys(t, "karpenter_cloudprovider_duration_seconds_bucket", "controller", "le", "method", "provider")
	create := map[string]string{"controller": "nodeclaim.lifecycle", "method": "Create", "provider": "aws"}
	up.expectDelta(t, base, "karpenter_cloudprovider_duration_seconds_count", create, n)
	up.expectKeys(t, "karpenter_cloudprovider_errors_total", "controller", "error", "method", "provider")
	notReady := map[string]string{"method": "GetInstanceTypes", "provider": "aws", "error": "NodeClassNotReadyError"}
	if d := up.sum("karpenter_cloudprovider_errors_total", notReady) - base.sum("karpenter_cloudprovider_errors_total", notReady); d < 1 {
		t.Errorf("karpenter_cloudprovider_errors_total%v grew by %v, want ≥ 1 (NodePool metrics-missing-class)", notReady, d)
	}
	for _, s := range up.series("karpenter_cloudprovider_errors_total", nil) {
		if e := s.labels["error"]; !slices.Contains([]string{"", "InsufficientCapacityError", "NodeClaimNotFoundError", "NodeClassNotReadyError"}, e) {
			t.Errorf("karpenter_cloudprovider_errors_total has error=%q, not one of Karpenter's", e)
		}
	}

	// The disruption: scaled to zero, emptiness deletes every NodeClaim.
	if _, err := e.cluster.Kubectl(e.ctx, nil, "scale", "deployment/metrics", "--replicas=0"); err != nil {
		t.Fatal(err)
	}
	var down scrape
	e.eventually(45*time.Second, "every NodeClaim gone and counted", func(ctx context.Context) (bool, error) {
		var left karpv1.NodeClaimList
		if err := e.kube.List(ctx, &left); err != nil {
			return false, err
		}
		s, err := scrapeAll(ctx, url, token)
		down = s
		return err == nil && len(left.Items) == 0 && s.value("karpenter_cluster_state_node_count", nil) == 0 &&
			s.value("karpenter_nodepools_usage", with(pool, "resource_type", "cpu")) == 0, nil
	})
	down.expectKeys(t, "karpenter_nodeclaims_disrupted_total", "capacity_type", "nodepool", "reason")
	// Each NodeClaim is counted once, with Karpenter's reason: "empty"
	// mostly, "underutilized" when a node's last pod was still
	// terminating as the pass ran (its pod fits elsewhere).
	od := map[string]string{"nodepool": "metrics", "capacity_type": "on-demand"}
	if d := down.sum("karpenter_nodeclaims_disrupted_total", od) - base.sum("karpenter_nodeclaims_disrupted_total", od); d != n {
		t.Errorf("karpenter_nodeclaims_disrupted_total%v grew by %v over all reasons, want %v", od, d, n)
	}
	for _, x := range down.series("karpenter_nodeclaims_disrupted_total", od) {
		if r := x.labels["reason"]; r != "empty" && r != "underutilized" {
			t.Errorf("karpenter_nodeclaims_disrupted_total has reason=%q after a scale to zero, want empty or underutilized", r)
		}
	}
	down.expectKeys(t, "karpenter_nodeclaims_terminated_total", "capacity_type", "nodepool")
	down.expectDelta(t, base, "karpenter_nodeclaims_terminated_total", map[string]string{"nodepool": "metrics", "capacity_type": "on-demand"}, n)
	// Termination alone terminates: the Node's termination calls Delete
	// for each node (again only if recording InstanceTerminating failed),
	// and the NodeClaim's finalizer (nodeclaim.lifecycle),
	// which finds InstanceTerminating=True, never does.
	del := map[string]string{"controller": "node.termination", "method": "Delete", "provider": "aws"}
	lcDel := with(del, "controller", "nodeclaim.lifecycle")
	termDeletes := down.value("karpenter_cloudprovider_duration_seconds_count", del) - base.value("karpenter_cloudprovider_duration_seconds_count", del)
	lcDeletes := down.value("karpenter_cloudprovider_duration_seconds_count", lcDel) - base.value("karpenter_cloudprovider_duration_seconds_count", lcDel)
	scenarioLogf(t, "scenario metrics: cloud provider Delete calls by node.termination +%v, by nodeclaim.lifecycle +%v", termDeletes, lcDeletes)
	if termDeletes < n || lcDeletes != 0 {
		t.Errorf("cloud provider Delete calls: node.termination +%v, nodeclaim.lifecycle +%v; want ≥ +%v and +0 (termination alone terminates)", termDeletes, lcDeletes, n)
	}
	empty, under := with(od, "reason", "empty"), with(od, "reason", "underutilized")
	scenarioLogf(t, "scenario metrics: scaled to zero; disrupted{reason=empty} +%v, {reason=underutilized} +%v, terminated +%v",
		down.value("karpenter_nodeclaims_disrupted_total", empty)-base.value("karpenter_nodeclaims_disrupted_total", empty),
		down.value("karpenter_nodeclaims_disrupted_total", under)-base.value("karpenter_nodeclaims_disrupted_total", under),
		down.value("karpenter_nodeclaims_terminated_total", od)-base.value("karpenter_nodeclaims_terminated_total", od))
}

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape is every sample of one /metrics response.
type scrape []sample

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// getMetrics fetches a /metrics url with token as its bearer token (the
// binaries' metrics are authenticated by default: metricsReaderToken); the
// caller closes the body. A status other than 200 is an error.
func getMetrics(ctx context.Context, url, token string) (io.ReadCloser, error) {
	req, err := newMetricsRequest(ctx, url, token)
	if err != nil {
		return nil, err
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp.Body, nil
}

// scrapeAll fetches url as token's holder and parses its samples.
func scrapeAll(ctx context.Context, url, token string) (scrape, error) {
	body, err := getMetrics(ctx, url, token)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	var out scrape
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil || strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", sc.Text(), err)
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[p[1]] = p[2]
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// series returns the samples of name whose labels include match.
func (s scrape) series(name string, match map[string]string) []sample {
	var out []sample
	for _, x := range s {
		if x.name != name {
			continue
		}
		ok := true
		for k, v := range match {
			if x.labels[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, x)
		}
	}
	return out
}

// value is the sample of name with exactly labels (nil: none), 0 if absent.
func (s scrape) value(name string, labels map[string]string) float64 {
	for _, x := range s.series(name, labels) {
		if len(x.labels) == len(labels) {
			return x.value
		}
	}
	return 0
}

// sum adds the samples of name whose labels include match.
func (s scrape) sum(name string, match map[string]string) float64 {
	total := 0.0
	for _, x := range s.series(name, match) {
		total += x.value
	}
	return total
}

func (s scrape) count(prefix string) int {
	n := 0
	for _, x := range s {
		if strings.HasPrefix(x.name, prefix) {
			n++
		}
	}
	return n
}

// expectKeys checks that name has samples and every one has exactly the
// label keys keys (sorted).
func (s scrape) expectKeys(t *testing.T, name string, keys ...string) {
	t.Helper()
	all := s.series(name, nil)
	if len(all) == 0 {
		t.Errorf("%s is not on /metrics", name)
	}
	for _, x := range all {
		var got []string
		for k := range x.labels {
			got = append(got, k)
		}
		sort.Strings(got)
		if !slices.Equal(got, keys) {
			t.Errorf("%s%v has label keys %v, want Karpenter's %v", name, x.labels, got, keys)
			return
		}
	}
}

func (s scrape) expectValue(t *testing.T, name string, labels map[string]string, want float64) {
	t.Helper()
	if got := s.value(name, labels); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func (s scrape) expectDelta(t *testing.T, base scrape, name string, labels map[string]string, want float64) {
	t.Helper()
	if got := s.value(name, labels) - base.value(name, labels); got != want {
		t.Errorf("%s%v grew by %v, want %v", name, labels, got, want)
	}
}

// with returns a copy of m with k=v added.
func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{}
	for a, b := range m {
		out[a] = b
	}
	out[k] = v // after the copy: v replaces m's value of k
	return out
}
