package capacity

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/awslabs/operatorpkg/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/plugin/cluster"
	"github.com/karpx/karpx/plugin/output"
)

func TestCapacityTable(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/capacity" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"learning":true,"entries":[`+
			`{"instanceType":"m5.large","amiID":"ami-1","estimate":{"cpu":"1930m","memory":"6903Mi","pods":"29","ephemeral-storage":"17Gi"},"observed":{"allocatable":{"cpu":"1930m","memory":"5879Mi","pods":"29","ephemeral-storage":"16Gi"},"at":%q,"node":"ip-10-0-0-1"}},`+
			`{"instanceType":"m5.xlarge","amiID":"ami-1","estimate":{"cpu":"3920m","memory":"14162Mi","pods":"58"}}]}`, at.Format(time.RFC3339))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		args []string
		want []string
		not  []string
	}{
		{nil, []string{"m5.large", "ami-1", "6903Mi→5879Mi", "2m", "ip-10-0-0-1"}, []string{"m5.xlarge"}},
		{[]string{"--all"}, []string{"m5.large", "m5.xlarge", "14162Mi", "<none>"}, []string{"EPHEMERAL-STORAGE"}},
		{[]string{"-o", "wide"}, []string{"EPHEMERAL-STORAGE", "17Gi→16Gi"}, []string{"m5.xlarge"}},
		{[]string{"-o", "yaml", "--all"}, []string{"apiVersion: karpx.io/v1alpha1", "kind: CapacityReport", "instanceType: m5.xlarge", "node: ip-10-0-0-1"}, nil},
	} {
		streams, _, out, errOut := genericiooptions.NewTestIOStreams()
		cmd := NewCmd(&cluster.StaticFactory{}, streams)
		cmd.SetArgs(append([]string{"--endpoint", srv.URL}, tc.args...))
		cmd.SetOut(out)
		cmd.SetErr(errOut)
		nowFn = func() time.Time { return at.Add(2 * time.Minute) } // ages from a fixed clock
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v (%s)", tc.args, err, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(out.String(), n) {
				t.Errorf("%v: output has %q:\n%s", tc.args, n, out)
			}
		}
	}
	streams, _, _, _ := genericiooptions.NewTestIOStreams()
	cmd := NewCmd(&cluster.StaticFactory{}, streams)
	cmd.SetArgs([]string{"--endpoint", srv.URL, "-o", "name"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `unable to match a printer suitable for the output format "name"`) {
		t.Errorf("-o name: %v, want kubectl's unsupported-format error", err)
	}
}

// TestCapacityWithoutController: on a cluster run by upstream Karpenter
// (no karpx controller) the command lists each NodeClaim's allocatable
// against its Node's, from the objects, and says why.
func TestCapacityWithoutController(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "general-abcde",
		Labels: map[string]string{karpv1.NodePoolLabelKey: "general", corev1.LabelInstanceTypeStable: "m5.large"}}}
	nc.Status.NodeName = "kwok-general-abcde"
	nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("6903Mi"), corev1.ResourcePods: resource.MustParse("29")}
	nc.Status.Conditions = []status.Condition{{Type: karpv1.ConditionTypeRegistered, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
	pending := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "general-zzzzz", Labels: map[string]string{karpv1.NodePoolLabelKey: "general"}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-general-abcde"}}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("6000Mi"), corev1.ResourcePods: resource.MustParse("29")}
	s := cluster.NewScheme()
	f := &cluster.StaticFactory{SchemeValue: s, ClientValue: fake.NewClientBuilder().WithScheme(s).WithObjects(nc, pending, node).Build()}
	for _, tc := range []struct {
		format string
		want   []string
	}{
		{"", []string{"NODECLAIM", "general-abcde", "m5.large", "6903Mi→6000Mi", "1930m→1930m", "2m", "kwok-general-abcde", "general-zzzzz", "<none>"}},
		{"yaml", []string{"kind: NodeClaimCapacityReport", "nodeClaim: general-abcde", "node: kwok-general-abcde"}},
	} {
		streams, _, out, errOut := genericiooptions.NewTestIOStreams()
		o := &Options{IOStreams: streams, Print: output.NewFlags(false), Factory: f, Now: func() time.Time { return at.Add(2 * time.Minute) }}
		*o.Print.PrintFlags.OutputFormat = tc.format
		if err := o.runWithoutController(context.Background(), errOut); err != nil {
			t.Fatalf("%q: %v", tc.format, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%q: output lacks %q:\n%s", tc.format, w, out)
			}
		}
		if !strings.Contains(errOut.String(), NoControllerMessage) {
			t.Errorf("%q: stderr lacks the reason: %q", tc.format, errOut)
		}
	}
}
