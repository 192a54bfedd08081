package provisioning

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// bindsBetweenReads is a client whose pod lists, from the bindAt-th on,
// show pod bound to node: kube-scheduler binding it while a provisioning
// pass runs, between the pass's read of the pending pods and its
// snapshot of the cluster.
type bindsBetweenReads struct {
	client.Client
	pod, node string
	bindAt    int
	lists     int
}

func (c *bindsBetweenReads) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	pods, ok := list.(*corev1.PodList)
	if !ok {
		return nil
	}
	c.lists++
	for i := range pods.Items {
		if c.lists >= c.bindAt && pods.Items[i].Name == c.pod {
			pods.Items[i].Spec.NodeName = c.node
			pods.Items[i].Status.Conditions = nil
		}
	}
	return nil
}

// A pod pending when a pass reads the pending pods and bound to the only
// node with room when the same pass snapshots the cluster gets no
// NodeClaim: counted on its node and planned as pending, it fitted
// nowhere and got a node of its own (a 5th NodeClaim for 4 GPU pods in
// TestScenarioP4NoDuplicateLaunch, under load). The controls: bound from
// the first read on, or pending in both reads with room on the node, it
// gets none either; pending in both with the node full, it gets one.
func TestPodBoundDuringThePassGetsNoNodeClaim(t *testing.T) {
	for _, tc := range []struct {
		name       string
		bindAt     int  // the pod list (1 = pending read, 2 = snapshot) from which the pod is bound; 0 = never
		nodeFull   bool // another pod takes 1 of the node's 2 CPUs
		wantClaims int
	}{
		{"bound between the reads", 2, false, 0},
		{"bound before the pass", 1, false, 0},
		{"pending throughout, room on the node", 0, false, 0},
		{"pending throughout, node full", 0, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
			np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
			pod := unschedulable(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}}}})
			room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("29")}
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"}},
				Status: corev1.NodeStatus{Allocatable: room, Capacity: room,
					Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
			objs := []client.Object{np, pod, node}
			if tc.nodeFull {
				objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default", UID: "db"},
					Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}})
			}
			inner := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
				WithIndex(&corev1.Pod{}, clusterstate.PodNodeNameField, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).Build()
			kube := &bindsBetweenReads{Client: inner, pod: "web", node: "n1", bindAt: tc.bindAt}
			if tc.bindAt == 0 {
				kube.bindAt = 1 << 30
			}
			p := NewProvisioner(kube, twoFamilies{}, record.NewFakeRecorder(10), nil, Options{})
			res, err := p.Schedule(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Created) != tc.wantClaims {
				t.Errorf("created %d NodeClaims (%v), want %d", len(res.Created), res.Created, tc.wantClaims)
			}
		})
	}
}
