package provisioning

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// oneTypeCloud serves one instance type, m5.large, to every NodePool.
type oneTypeCloud struct{ cloudprovider.CloudProvider }

func (oneTypeCloud) GetInstanceTypes(context.Context, *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return []*cloudprovider.InstanceType{{
		Name:        "m5.large",
		Labels:      map[string]string{corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7Gi"), corev1.ResourcePods: resource.MustParse("29")},
		Offerings:   []cloudprovider.Offering{{Zone: "us-east-1a", CapacityType: "on-demand", PriceUSDPerHour: 0.096, Available: true}},
	}}, nil
}

func testNodePool(name string, labels map[string]string) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Labels = labels
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: name}
	return np
}

// TestFailedProvisioningNamesTheOnlyFittingPoolFirst: a pod only a NodePool
// with NodeClassReady=False can take gets a FailedProvisioning event whose
// first reason is that NodePool's condition message, before the other
// NodePool's label mismatch; with every NodePool skipped the pod still
// gets the event.
func TestFailedProvisioningNamesTheOnlyFittingPoolFirst(t *testing.T) {
	broken := testNodePool("broken", map[string]string{"pool": "broken"})
	broken.StatusConditions().SetFalse(karpv1.ConditionTypeNodeClassReady, "NodeClassNotReady",
		"EC2NodeClass broken is not ready: SubnetsReady=False: spec.subnetSelectorTerms[0] matched no subnet")
	pod := unschedulable(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p"},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"pool": "broken"}, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}}})

	for _, tc := range []struct {
		name    string
		pools   []client.Object
		wantErr bool
	}{
		{"beside an available pool", []client.Object{testNodePool("general-purpose", nil), broken.DeepCopy()}, false},
		{"only unavailable pools", []client.Object{broken.DeepCopy()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(append(tc.pools, pod.DeepCopy())...).
				WithIndex(&corev1.Pod{}, clusterstate.PodNodeNameField, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).Build()
			rec := record.NewFakeRecorder(10)
			p := NewProvisioner(kube, oneTypeCloud{}, rec, nil, Options{})
			res, err := p.Schedule(context.Background())
			if (err != nil) != tc.wantErr || res.Unschedulable != 1 || len(res.Created) != 0 {
				t.Fatalf("Schedule = %+v, %v", res, err)
			}
			select {
			case ev := <-rec.Events:
				const first = `Warning FailedProvisioning karpx cannot launch a node for this pod: NodePool "broken" cannot launch nodes: NodeClassReady=False: EC2NodeClass broken is not ready: SubnetsReady=False`
				if !strings.HasPrefix(ev, first) {
					t.Errorf("event %q, want it to start with %q", ev, first)
				}
				if i := strings.Index(ev, `"general-purpose"`); i >= 0 && i < strings.Index(ev, `"broken"`) {
					t.Errorf("event %q names general-purpose first", ev)
				}
			default:
				t.Error("no FailedProvisioning event")
			}
		})
	}
}
