package scheduling_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/karpx/karpx/autoscaler/scheduling"
)

// TestAbsurdQuantities: quantities whose millis overflow int64 neither
// panic nor wrap around. Absurd requests are unschedulable with a reason
// naming the request; absurd limits mean unlimited; large but real limits
// still cap.
func TestAbsurdQuantities(t *testing.T) {
	tests := []struct {
		name      string
		pod       *corev1.Pod
		remaining corev1.ResourceList
		// wantPlaced, or the substring of the reason.
		wantPlaced bool
		reason     string
	}{
		{name: "memory: 1Ei request", pod: pod("big", "1", "1Ei"), reason: `no compatible instance type in NodePool "general-purpose" has room for memory=1Ei`},
		{name: "memory: 9Pi request", pod: pod("big", "1", "9Pi"), reason: "has room for memory=9Pi"},
		{name: "memory: 9Ei request (beyond int64 bytes)", pod: pod("big", "1", "9Ei"), reason: "more than any machine has"},
		{name: "cpu: 10Pi request", pod: pod("big", "10Pi", "1Gi"), reason: "more than any machine has"},
		{name: "limit memory: 1Ei provisions", pod: pod("web", "1", "1Gi"), remaining: resources("memory", "1Ei", "cpu", "1000"), wantPlaced: true},
		{name: "limit memory: 10000000Gi (Karpenter's benchmark) provisions", pod: pod("web", "1", "1Gi"), remaining: resources("memory", "10000000Gi", "cpu", "10000000"), wantPlaced: true},
		{name: "limit memory: 100Ei is unlimited", pod: pod("web", "1", "1Gi"), remaining: resources("memory", "100Ei"), wantPlaced: true},
		{name: "limit cpu: 1 still caps (control)", pod: pod("web", "2", "1Gi"), remaining: resources("cpu", "1"), reason: "limits reached"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			np := pool(generalPurpose())
			np.Remaining = tt.remaining
			res := solve(t, scheduling.Input{Pods: []*corev1.Pod{tt.pod}, NodePools: []scheduling.NodePoolInput{np}})
			if tt.wantPlaced {
				if len(res.NewNodeClaims) != 1 {
					t.Fatalf("want one NodeClaim, got %d (unschedulable: %v)", len(res.NewNodeClaims), res.Unschedulable)
				}
				return
			}
			err := res.Unschedulable[tt.pod.UID]
			if err == nil || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("reason %v, want one containing %q", err, tt.reason)
			}
		})
	}
}

// TestDaemonSetOverheadPerInstanceType: a DaemonSet that only runs on
// arm64 adds nothing to amd64 nodes, and its full request to arm64 ones.
func TestDaemonSetOverheadPerInstanceType(t *testing.T) {
	armOnly := pod("arm-agent", "2", "1Gi", nodeSelector(corev1.LabelArchStable, "arm64"))
	everywhere := pod("log-agent", "100m", "128Mi")
	tests := []struct {
		name    string
		arch    string
		wantCPU string
	}{
		{name: "amd64 node carries only the agent that runs everywhere", arch: "amd64", wantCPU: "1100m"},
		{name: "arm64 node carries both agents", arch: "arm64", wantCPU: "3100m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := solve(t, scheduling.Input{
				Pods:          []*corev1.Pod{pod("web", "1", "1Gi", nodeSelector(corev1.LabelArchStable, tt.arch))},
				NodePools:     []scheduling.NodePoolInput{pool(nodePool("any"))},
				DaemonSetPods: []*corev1.Pod{armOnly, everywhere},
			})
			if len(res.NewNodeClaims) != 1 {
				t.Fatalf("want one NodeClaim, got %d (%v)", len(res.NewNodeClaims), res.Unschedulable)
			}
			got := res.NewNodeClaims[0].Requests[corev1.ResourceCPU]
			if want := resource.MustParse(tt.wantCPU); got.Cmp(want) != 0 {
				t.Errorf("NodeClaim requests cpu %s, want %s", got.String(), want.String())
			}
		})
	}
}

func TestUnsupported(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{name: "plain pod", pod: pod("a", "1", "1Gi")},
		{name: "zone spread", pod: pod("a", "1", "1Gi", spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, sel("app", "a")))},
		{name: "hostname anti-affinity", pod: pod("a", "1", "1Gi", podAntiAffinity(corev1.LabelHostname, sel("app", "a")))},
		{name: "capacity-type spread", pod: pod("a", "1", "1Gi", spread("karpenter.sh/capacity-type", 1, corev1.DoNotSchedule, sel("app", "a")))},
		{name: "deprecated zone key", pod: pod("a", "1", "1Gi", podAffinity(corev1.LabelFailureDomainBetaZone, sel("app", "a")))},
		{name: "ScheduleAnyway on any key is only a preference", pod: pod("a", "1", "1Gi", spread("example.com/rack", 1, corev1.ScheduleAnyway, sel("app", "a")))},
		{name: "preferred anti-affinity on any key", pod: pod("a", "1", "1Gi", preferredAntiAffinity(1, "example.com/rack", sel("app", "a")))},
		{name: "rack pod affinity", pod: pod("a", "1", "1Gi", podAffinity("example.com/rack", sel("app", "a")))},
		{name: "rack anti-affinity", pod: pod("a", "1", "1Gi", podAntiAffinity("example.com/rack", sel("app", "a")))},
		{name: "instance-family spread", pod: pod("a", "1", "1Gi", spread("karpenter.k8s.aws/instance-family", 1, corev1.DoNotSchedule, sel("app", "a")))},
		{name: "namespaceSelector", pod: pod("a", "1", "1Gi", func(p *corev1.Pod) {
			podAffinity(corev1.LabelHostname, sel("app", "a"))(p)
			p.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].NamespaceSelector = sel("team", "x")
		})},
		{name: "invalid namespaceSelector", pod: pod("a", "1", "1Gi", func(p *corev1.Pod) {
			podAntiAffinity(corev1.LabelHostname, sel("app", "a"))(p)
			p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].NamespaceSelector = &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}}
		}), want: "pod anti-affinity on kubernetes.io/hostname has an invalid namespaceSelector"},
		{name: "resource claims", pod: pod("a", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}}
		}), want: "dynamic resource claims (spec.resourceClaims) are not modelled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scheduling.Unsupported(tt.pod); got != tt.want {
				t.Errorf("Unsupported() = %q, want %q", got, tt.want)
			}
		})
	}
}
