package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/plugin/cluster"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func nodePool(name string, mutate func(*karpv1.NodePool)) *karpv1.NodePool {
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: name + "-class"},
		}}},
	}
	if mutate != nil {
		mutate(np)
	}
	return np
}

func conds(types ...string) []status.Condition {
	var out []status.Condition
	for _, t := range types {
		st := metav1.ConditionTrue
		if name, ok := strings.CutSuffix(t, "=False"); ok {
			t, st = name, metav1.ConditionFalse
		} else if name, ok := strings.CutSuffix(t, "=Unknown"); ok {
			t, st = name, metav1.ConditionUnknown
		}
		out = append(out, status.Condition{Type: t, Status: st, Reason: t, LastTransitionTime: metav1.NewTime(now)})
	}
	return out
}

// nodeClaim returns a NodeClaim of pool created age ago with the given
// capacity ("cpu", "memory") and conditions (see conds).
func nodeClaim(name, pool string, age time.Duration, cpu, memory string, conditions ...string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			CreationTimestamp: metav1.NewTime(now.Add(-age)),
			Labels: map[string]string{
				karpv1.NodePoolLabelKey:        pool,
				corev1.LabelInstanceTypeStable: "m5.xlarge",
				corev1.LabelTopologyZone:       "us-east-1a",
				karpv1.CapacityTypeLabelKey:    "spot",
			},
		},
		Status: karpv1.NodeClaimStatus{
			Conditions: conds(conditions...),
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(memory),
			},
		},
	}
	return nc
}

// cluster1 is a cluster with two pools: "default" (limited, ready, weight
// 10) with three claims in different phases, and "gpu" (unlimited, no
// conditions, no weight) with two claims.
func cluster1() []client.Object {
	initialized := nodeClaim("default-aaaaa", "default", 3*time.Hour, "4", "16Gi",
		karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, "Ready")
	initialized.Status.NodeName = "ip-10-0-1-1.ec2.internal"
	initialized.Status.ProviderID = "aws:///us-east-1a/i-0123456789abcdef0"
	initialized.Status.ImageID = "ami-0abc"
	registered := nodeClaim("default-bbbbb", "default", 90*time.Second, "8", "31.5Gi",
		karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized+"=Unknown")
	registered.Status.NodeName = "ip-10-0-1-2.ec2.internal"
	terminating := nodeClaim("default-ccccc", "default", 49*time.Hour, "500m", "2Gi",
		karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized)
	terminating.DeletionTimestamp = ptr(metav1.NewTime(now))
	terminating.Finalizers = []string{karpv1.TerminationFinalizer}
	launched := nodeClaim("gpu-xxxxx", "gpu", 40*time.Second, "16", "64Gi", karpv1.ConditionTypeLaunched)
	unknown := nodeClaim("gpu-yyyyy", "gpu", 5*time.Second, "0", "0")
	delete(unknown.Labels, corev1.LabelInstanceTypeStable)
	delete(unknown.Labels, corev1.LabelTopologyZone)
	delete(unknown.Labels, karpv1.CapacityTypeLabelKey)
	unknown.Status.Capacity = nil

	return []client.Object{
		nodePool("gpu", nil),
		nodePool("default", func(np *karpv1.NodePool) {
			np.Spec.Limits = karpv1.Limits{
				corev1.ResourceCPU:    resource.MustParse("100"),
				corev1.ResourceMemory: resource.MustParse("1000Gi"),
			}
			np.Spec.Weight = ptr(int32(10))
			np.Status.Conditions = conds("Ready")
		}),
		initialized, registered, terminating, launched, unknown,
	}
}

func newFactory(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) *cluster.StaticFactory {
	t.Helper()
	s := cluster.NewScheme()
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	return &cluster.StaticFactory{ClientValue: b.Build(), SchemeValue: s}
}

// withBudget, when set by a test, keeps the budget line (Options.Budget),
// which the other tests drop so that they read no controller.
var withBudget bool

// run executes `status args...` against f and returns stdout and stderr.
func run(t *testing.T, f cluster.Factory, args ...string) (string, string, error) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	o := NewOptions(f, streams)
	o.Now = func() time.Time { return now }
	if !withBudget {
		o.Budget = nil // the tables' tests read no controller
	}
	cmd := newCmd(o)
	cmd.SetArgs(args)
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestStatusTables(t *testing.T) {
	out, errOut, err := run(t, newFactory(t, nil, cluster1()...))
	if err != nil {
		t.Fatal(err)
	}
	want := `NAME      NODECLASS       NODES   CPU        MEMORY          READY     WEIGHT
default   default-class   3       12.5/100   49.5Gi/1000Gi   True      10
gpu       gpu-class       1       16/-       64Gi/-          Unknown   <none>

NAME            NODEPOOL   INSTANCE-TYPE   ZONE         CAPACITY   PHASE         NODE                       AGE
default-aaaaa   default    m5.xlarge       us-east-1a   spot       Initialized   ip-10-0-1-1.ec2.internal   3h
default-bbbbb   default    m5.xlarge       us-east-1a   spot       Registered    ip-10-0-1-2.ec2.internal   90s
default-ccccc   default    m5.xlarge       us-east-1a   spot       Terminating   <none>                     2d1h
gpu-xxxxx       gpu        m5.xlarge       us-east-1a   spot       Launched      <none>                     40s
gpu-yyyyy       gpu        <none>          <none>       <none>     Unknown       <none>                     5s
`
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
	if errOut != "" {
		t.Errorf("stderr = %q, want empty", errOut)
	}
}

func TestStatusWide(t *testing.T) {
	out, _, err := run(t, newFactory(t, nil, cluster1()...), "-o", "wide", "--nodepool", "default")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	var header, first string
	for i, l := range lines {
		if strings.HasPrefix(l, "NAME ") && strings.Contains(l, "NODEPOOL") {
			header, first = l, lines[i+1]
		}
	}
	for _, col := range []string{"PROVIDER-ID", "IMAGE"} {
		if !strings.Contains(header, col) {
			t.Errorf("wide NodeClaims header %q lacks %s", header, col)
		}
	}
	if !strings.HasSuffix(first, "aws:///us-east-1a/i-0123456789abcdef0   ami-0abc") {
		t.Errorf("wide row %q lacks provider ID and image", first)
	}
	if strings.Contains(out, "gpu") {
		t.Errorf("--nodepool default printed the gpu pool:\n%s", out)
	}
}

func TestStatusNodePoolFilter(t *testing.T) {
	out, errOut, err := run(t, newFactory(t, nil, cluster1()...), "--nodepool", "gpu", "--no-headers")
	if err != nil {
		t.Fatal(err)
	}
	want := `gpu   gpu-class   1     16/-   64Gi/-   Unknown   <none>

gpu-xxxxx   gpu   m5.xlarge   us-east-1a   spot     Launched   <none>   40s
gpu-yyyyy   gpu   <none>      <none>       <none>   Unknown    <none>   5s
`
	if out != want || errOut != "" {
		t.Errorf("stdout:\n%s\nwant:\n%s\nstderr: %q", out, want, errOut)
	}
}

func TestStatusNodePoolFilterOrphanClaims(t *testing.T) {
	// The pool was deleted but its NodeClaims are still draining.
	objs := cluster1()[2:]
	out, errOut, err := run(t, newFactory(t, nil, objs...), "--nodepool", "default")
	if err != nil {
		t.Fatal(err)
	}
	if errOut != NoNodePoolsMessage+"\n" {
		t.Errorf("stderr = %q, want %q", errOut, NoNodePoolsMessage)
	}
	if got := strings.Count(out, "default-"); got != 3 {
		t.Errorf("printed %d NodeClaims of default, want 3:\n%s", got, out)
	}
}

func TestStatusNodePoolNotFound(t *testing.T) {
	_, _, err := run(t, newFactory(t, nil, cluster1()...), "--nodepool", "nope")
	if !apierrors.IsNotFound(err) || err.Error() != `nodepools.karpenter.sh "nope" not found` {
		t.Errorf("err = %v, want NotFound for nodepools.karpenter.sh \"nope\"", err)
	}
	_, _, err = run(t, newFactory(t, nil), "--nodepool", "Not_A_Name")
	if err == nil || !strings.Contains(err.Error(), `invalid --nodepool "Not_A_Name"`) {
		t.Errorf("err = %v, want invalid --nodepool", err)
	}
}

func TestStatusEmptyCluster(t *testing.T) {
	for _, args := range [][]string{nil, {"-o", "wide"}} {
		out, errOut, err := run(t, newFactory(t, nil), args...)
		if err != nil {
			t.Fatal(err)
		}
		if out != "" {
			t.Errorf("%v: stdout = %q, want empty", args, out)
		}
		if want := "No NodePools found.\nNo NodeClaims found.\n"; errOut != want {
			t.Errorf("%v: stderr = %q, want %q", args, errOut, want)
		}
	}
}

func TestStatusPoolsWithoutClaims(t *testing.T) {
	out, errOut, err := run(t, newFactory(t, nil, nodePool("idle", nil)))
	if err != nil {
		t.Fatal(err)
	}
	want := "NAME   NODECLASS    NODES   CPU   MEMORY   READY     WEIGHT\nidle   idle-class   0       0/-   0/-      Unknown   <none>\n"
	if out != want || errOut != NoNodeClaimsMessage+"\n" {
		t.Errorf("stdout:\n%s\nwant:\n%s\nstderr: %q", out, want, errOut)
	}
}

func TestStatusJSON(t *testing.T) {
	out, _, err := run(t, newFactory(t, nil, cluster1()...), "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Items      []struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Errorf("list is %s %s, want v1 List", list.APIVersion, list.Kind)
	}
	var got []string
	for _, it := range list.Items {
		got = append(got, it.APIVersion+" "+it.Kind+" "+it.Metadata.Name)
	}
	want := []string{
		"karpenter.sh/v1 NodePool default",
		"karpenter.sh/v1 NodePool gpu",
		"karpenter.sh/v1 NodeClaim default-aaaaa",
		"karpenter.sh/v1 NodeClaim default-bbbbb",
		"karpenter.sh/v1 NodeClaim default-ccccc",
		"karpenter.sh/v1 NodeClaim gpu-xxxxx",
		"karpenter.sh/v1 NodeClaim gpu-yyyyy",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("items:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestStatusYAMLAndJSONPath(t *testing.T) {
	f := newFactory(t, nil, cluster1()...)
	out, _, err := run(t, f, "-o", "yaml", "--nodepool", "gpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"apiVersion: v1\n", "kind: List\n", "kind: NodePool\n", "name: gpu-yyyyy\n"} {
		if !strings.Contains(out, s) {
			t.Errorf("yaml lacks %q:\n%s", s, out)
		}
	}
	out, _, err = run(t, f, "-o", "jsonpath={.items[*].metadata.name}", "--nodepool", "gpu")
	if err != nil {
		t.Fatal(err)
	}
	if want := "gpu gpu-xxxxx gpu-yyyyy"; out != want {
		t.Errorf("jsonpath = %q, want %q", out, want)
	}
}

func TestStatusName(t *testing.T) {
	out, _, err := run(t, newFactory(t, nil, cluster1()...), "-o", "name", "--nodepool", "gpu")
	if err != nil {
		t.Fatal(err)
	}
	want := "nodepool.karpenter.sh/gpu\nnodeclaim.karpenter.sh/gpu-xxxxx\nnodeclaim.karpenter.sh/gpu-yyyyy\n"
	if out != want {
		t.Errorf("-o name:\n%s\nwant:\n%s", out, want)
	}
	// An empty cluster prints an empty list, not the table messages.
	out, errOut, err := run(t, newFactory(t, nil), "-o", "name")
	if err != nil || out != "" || errOut != "" {
		t.Errorf("empty -o name: out %q, errOut %q, err %v", out, errOut, err)
	}
}

func TestStatusBadOutput(t *testing.T) {
	_, _, err := run(t, newFactory(t, nil), "-o", "tree")
	if err == nil || !strings.Contains(err.Error(), `output format "tree"`) || !strings.Contains(err.Error(), "wide") {
		t.Errorf("err = %v, want unknown output format listing wide", err)
	}
}

func TestStatusCRDNotInstalled(t *testing.T) {
	for _, tc := range []struct {
		name     string
		list     func(client.ObjectList) error
		resource string
	}{{
		name: "no match from discovery",
		list: func(client.ObjectList) error {
			return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "karpenter.sh", Kind: "NodePool"}, SearchedVersions: []string{"v1"}}
		},
		resource: "nodepools",
	}, {
		name: "NotFound from server for NodeClaims",
		list: func(l client.ObjectList) error {
			if _, ok := l.(*karpv1.NodeClaimList); ok {
				return apierrors.NewNotFound(schema.GroupResource{}, "")
			}
			return nil
		},
		resource: "nodeclaims",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFactory(t, &interceptor.Funcs{List: func(_ context.Context, _ client.WithWatch, l client.ObjectList, _ ...client.ListOption) error {
				return tc.list(l)
			}})
			_, _, err := run(t, f)
			want := `the server doesn't have a resource type "` + tc.resource + `" (karpenter.sh/v1): install Karpenter's or karpx's CRDs (manifests/crds)`
			if err == nil || err.Error() != want {
				t.Errorf("err = %v\nwant %s", err, want)
			}
			if !cluster.IsNotInstalled(err) {
				t.Errorf("IsNotInstalled(%v) = false", err)
			}
		})
	}
}

func TestStatusForbidden(t *testing.T) {
	forbidden := apierrors.NewForbidden(cluster.NodePoolsResource.GroupResource(), "",
		errors.New(`User "dev" cannot list resource "nodepools" in API group "karpenter.sh" at the cluster scope`))
	f := newFactory(t, &interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return forbidden
	}})
	_, _, err := run(t, f)
	if !apierrors.IsForbidden(err) || err.Error() != forbidden.Error() {
		t.Errorf("err = %v, want the server's Forbidden unchanged", err)
	}
}

func TestPhase(t *testing.T) {
	for _, tc := range []struct {
		conditions  []string
		terminating bool
		want        string
	}{
		{nil, false, PhaseUnknown},
		{nil, true, PhaseTerminating},
		{[]string{"Launched=Unknown"}, false, PhasePending},
		{[]string{"Launched=False"}, false, PhasePending},
		{[]string{"Launched"}, false, PhaseLaunched},
		{[]string{"Launched", "Registered=Unknown"}, false, PhaseLaunched},
		{[]string{"Registered", "Launched"}, false, PhaseRegistered},
		{[]string{"Registered", "Initialized"}, false, PhasePending}, // not launched: chain broken
		{[]string{"Launched", "Registered", "Initialized=False"}, false, PhaseRegistered},
		{[]string{"Launched", "Registered", "Initialized", "Ready"}, false, PhaseInitialized},
		{[]string{"Launched", "Registered", "Initialized"}, true, PhaseTerminating},
	} {
		nc := &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{Conditions: conds(tc.conditions...)}}
		if tc.terminating {
			nc.DeletionTimestamp = ptr(metav1.NewTime(now))
		}
		if got := Phase(nc); got != tc.want {
			t.Errorf("Phase(%v, terminating=%v) = %s, want %s", tc.conditions, tc.terminating, got, tc.want)
		}
	}
}

func TestFormatQuantities(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "12": "12", "3500m": "3.5", "250m": "0.25", "100": "100"} {
		if got := formatCPU(resource.MustParse(in)); got != want {
			t.Errorf("formatCPU(%s) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"0": "0", "512": "512", "1Ki": "1Ki", "512Mi": "512Mi", "16Gi": "16Gi", "15722Mi": "15.4Gi",
		"1000Gi": "1000Gi", "1Ti": "1Ti", "16G": "14.9Gi",
	} {
		if got := formatBytes(resource.MustParse(in)); got != want {
			t.Errorf("formatBytes(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestStatusShowsTheEC2APIBudgetLine(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/throttle" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"enabled":true,"fraction":0.5,"totals":{"requests":120,"throttled":0,"retries":2,"quotaErrors":0}}`)
	}))
	defer srv.Close()
	withBudget = true
	defer func() { withBudget = false }()
	out, _, err := run(t, newFactory(t, nil), "--budget-endpoint", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	want := "EC2 API: client-side budget at 50% of AWS's rates; 120 requests, 0 throttled, 2 retries, 0 retry-quota errors"
	if !strings.Contains(out, want) {
		t.Fatalf("status output lacks the budget line %q:\n%s", want, out)
	}
}

func TestStatusBadBudgetEndpoint(t *testing.T) {
	withBudget = true
	defer func() { withBudget = false }()
	out, _, err := run(t, newFactory(t, nil, cluster1()...), "--budget-endpoint", "127.0.0.1:8080")
	if err == nil || !strings.Contains(err.Error(), "--budget-endpoint") || !strings.Contains(err.Error(), `invalid --endpoint "127.0.0.1:8080"`) {
		t.Errorf("err = %v, want invalid --budget-endpoint (--endpoint) \"127.0.0.1:8080\"", err)
	}
	if out != "" {
		t.Errorf("stdout = %q, want empty: the tables are not printed after a usage error", out)
	}
}

// TestStatusReadyReflectsNodeClassAndRegistration: READY is False for a
// pool whose Ready is still True but whose EC2NodeClass is not ready, or
// whose launches keep failing, and -o wide shows why.
func TestStatusReadyReflectsNodeClassAndRegistration(t *testing.T) {
	f := newFactory(t, nil,
		nodePool("badclass", func(np *karpv1.NodePool) {
			np.Status.Conditions = conds("Ready", "NodeClassReady=False")
		}),
		nodePool("failing", func(np *karpv1.NodePool) {
			np.Status.Conditions = conds("Ready", "NodeClassReady", "NodeRegistrationHealthy=False")
		}),
		nodePool("healthy", func(np *karpv1.NodePool) {
			np.Status.Conditions = conds("Ready", "NodeClassReady", "NodeRegistrationHealthy")
		}),
	)
	out, _, err := run(t, f, "-o", "wide", "--no-headers")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := map[string][]string{
		"badclass": {"False", "NodeClassReady: NodeClassReady"},
		"failing":  {"False", "NodeRegistrationHealthy: NodeRegistrationHealthy"},
		"healthy":  {"True", "<none>"},
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 7 {
			continue
		}
		w, ok := want[f[0]]
		if !ok {
			continue
		}
		if f[5] != w[0] || !strings.Contains(l, w[1]) {
			t.Errorf("%s: READY %s, line %q; want %s and %q", f[0], f[5], l, w[0], w[1])
		}
		delete(want, f[0])
	}
	if len(want) > 0 {
		t.Errorf("pools missing from output %q: %v", out, want)
	}
}

// TestStatusShowsDataSets: the controller's cloud data sets are listed
// under the tables with hydration, age, items and last error.
func TestStatusShowsDataSets(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/throttle":
			fmt.Fprint(w, `{"enabled":true,"fraction":0.5,"totals":{}}`)
		case "/hydration":
			fmt.Fprintf(w, `{"dataSets":[{"name":"instance-types","required":true,"hydrated":true,"hydratedAt":%q,"items":742,"lastError":"describing instance types: 503"},`+
				`{"name":"spot-prices","hydrated":false,"items":0,"lastError":"budget refused"}]}`, now.Add(-90*time.Second).Format(time.RFC3339))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	withBudget = true
	defer func() { withBudget = false }()
	out, _, err := run(t, newFactory(t, nil), "--budget-endpoint", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"DATA-SET         HYDRATED          AGE      ITEMS   LAST-ERROR",
		"instance-types   True (required)   90s      742     describing instance types: 503",
		"spot-prices      False             <none>   0       budget refused",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
