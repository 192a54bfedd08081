package explain

import (
	"context"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	karpxv1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// catalogCloud serves explain's instance types (the catalogue in zones),
// so the scheduler's input differs from explain's only in what the
// scheduler computes itself.
type catalogCloud struct {
	cloudprovider.CloudProvider
	zones []string
}

func (c catalogCloud) GetInstanceTypes(context.Context, *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return catalogTypes(c.zones), nil
}

// TestExplainAgreesWithSchedulerOnLaunchingNodeClaims: NodePool limited
// has spec.limits cpu 4. A NodeClaim still launching has no
// status.capacity yet, only spec.resources.requests: the scheduler
// (provisioning's clusterstate.NodePoolInputs) counts those against the
// limit and launches nothing more, and explain must say the same (the old
// explain counted status.capacity only and said the pool could launch).
// Controls: a launched NodeClaim under the limit (both launch) and one
// over it (remaining negative for the scheduler; both refuse).
func TestExplainAgreesWithSchedulerOnLaunchingNodeClaims(t *testing.T) {
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	for _, tt := range []struct {
		name               string
		requests, capacity corev1.ResourceList
		launch             bool
	}{
		{name: "launching, at the limit", requests: cpu("4"), launch: false},
		{name: "launched, under the limit", requests: cpu("4"), capacity: cpu("2"), launch: true},
		{name: "launched, over the limit", requests: cpu("2"), capacity: cpu("6"), launch: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			np := nodePool("limited", 0, "default", req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"))
			np.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("4")}
			claim := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "limited-x", Labels: map[string]string{karpv1.NodePoolLabelKey: "limited"}}}
			claim.Spec.Resources.Requests = tt.requests
			claim.Status.Capacity = tt.capacity
			s := &Snapshot{
				Pod:            pendingPod("1", "1Gi"),
				NodePools:      []karpv1.NodePool{*np},
				EC2NodeClasses: []karpxv1.EC2NodeClass{ec2NodeClass("default", "us-east-1a")},
				NodeClaims:     []karpv1.NodeClaim{claim},
			}

			inputs, _ := clusterstate.NodePoolInputs(context.Background(), catalogCloud{zones: []string{"us-east-1a"}}, s.NodePools, s.NodeClaims, nil,
				func(_ *karpv1.NodePool, err error) { t.Fatal(err) })
			res := scheduling.Solve(scheduling.Input{Pods: []*corev1.Pod{s.Pod.DeepCopy()}, NodePools: inputs})
			scheduled := len(res.NewNodeClaims) == 1
			if scheduled != tt.launch {
				t.Fatalf("scheduler launches %v, want %v (unschedulable: %v)", scheduled, tt.launch, res.Unschedulable)
			}

			zones, _ := s.zones()
			in, reason := s.nodePoolInput(&s.NodePools[0], zones, nil)
			if reason != "" {
				t.Fatal(reason)
			}
			if !reflect.DeepEqual(in.Remaining, inputs[0].Remaining) {
				t.Errorf("explain's remaining %v, the scheduler's %v", in.Remaining, inputs[0].Remaining)
			}
			if r := result(t, Explain(s), "limited"); r.CanLaunch != scheduled {
				t.Errorf("explain says canLaunch %v (%s), the scheduler launches %v", r.CanLaunch, r.Reason, scheduled)
			}
		})
	}
}

// TestExplainAgreesWithSchedulerOnDaemonSetOverhead: explain reads the
// DaemonSets of the cluster into the same template pods the autoscaler
// reserves on every new node (clusterstate.DaemonSetPods), so both refuse
// a pod that fits a node's allocatable only without the DaemonSet's
// requests. Control: with a small DaemonSet both launch.
func TestExplainAgreesWithSchedulerOnDaemonSetOverhead(t *testing.T) {
	for _, tt := range []struct {
		name   string
		dsCPU  string
		launch bool
	}{
		{name: "small DaemonSet", dsCPU: "100m", launch: true},
		{name: "DaemonSet that fills the node", dsCPU: "1900m", launch: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			np := nodePool("large", 0, "default", req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large"))
			pod := pendingPod("1", "1Gi")
			class := ec2NodeClass("default", "us-east-1a")
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system"},
				Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(tt.dsCPU)}}}}}}}}
			kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pod, np, &class, ds).Build()
			o := &Options{client: kube, PodNamespace: pod.Namespace, PodName: pod.Name}
			s, err := o.read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want, err := clusterstate.DaemonSetPods(context.Background(), kube)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s.DaemonSetPods, want) {
				t.Fatalf("explain's DaemonSet pods %v, the autoscaler's %v", s.DaemonSetPods, want)
			}

			inputs, _ := clusterstate.NodePoolInputs(context.Background(), catalogCloud{zones: []string{"us-east-1a"}}, s.NodePools, s.NodeClaims, nil,
				func(_ *karpv1.NodePool, err error) { t.Fatal(err) })
			res := scheduling.Solve(scheduling.Input{Pods: []*corev1.Pod{s.Pod.DeepCopy()}, NodePools: inputs, DaemonSetPods: want})
			if scheduled := len(res.NewNodeClaims) == 1; scheduled != tt.launch {
				t.Fatalf("scheduler launches %v, want %v (unschedulable: %v)", scheduled, tt.launch, res.Unschedulable)
			}
			if r := result(t, Explain(s), "large"); r.CanLaunch != tt.launch {
				t.Errorf("explain says canLaunch %v (%s), the scheduler launches %v", r.CanLaunch, r.Reason, tt.launch)
			}
		})
	}
}
