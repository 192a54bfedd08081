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
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
)

// twoFamilies serves m5.large and c5.large: two instance families.
type twoFamilies struct{ cloudprovider.CloudProvider }

func (twoFamilies) GetInstanceTypes(context.Context, *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	it := func(name, family string, price float64) *cloudprovider.InstanceType {
		res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("29")}
		return &cloudprovider.InstanceType{
			Name:        name,
			Labels:      map[string]string{corev1.LabelInstanceTypeStable: name, "karpenter.k8s.aws/instance-family": family, corev1.LabelArchStable: "amd64", corev1.LabelOSStable: "linux"},
			Capacity:    res,
			Allocatable: res.DeepCopy(),
			Offerings:   []cloudprovider.Offering{{Zone: "us-east-1a", CapacityType: "on-demand", PriceUSDPerHour: price, Available: true}},
		}
	}
	return []*cloudprovider.InstanceType{it("m5.large", "m5", 0.096), it("c5.large", "c5", 0.085)}, nil
}

// TestMinValuesPolicy: a NodePool asking for 3 instance families when its
// EC2NodeClass offers 2 gets no NodeClaim under Strict (the pod gets a
// FailedProvisioning event naming minValues) and one NodeClaim with the
// 2 families, minValues lowered to 2 and the
// karpenter.sh/nodeclaim-min-values-relaxed annotation under BestEffort.
func TestMinValuesPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy      scheduling.MinValuesPolicy
		wantClaims  int
		wantEvent   string
		wantRelaxed bool
	}{
		{scheduling.MinValuesPolicyStrict, 0, "FailedProvisioning", false},
		{scheduling.MinValuesPolicyBestEffort, 1, NominatedReason, true},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "diverse"}}
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{
				Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpExists, MinValues: new(3)}}
			np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
			pod := unschedulable(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}}})
			kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(np, pod).
				WithIndex(&corev1.Pod{}, clusterstate.PodNodeNameField, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).Build()
			rec := record.NewFakeRecorder(10)
			p := NewProvisioner(kube, twoFamilies{}, rec, nil, Options{MinValuesPolicy: tc.policy})
			res, err := p.Schedule(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var claims karpv1.NodeClaimList
			if err := kube.List(context.Background(), &claims); err != nil {
				t.Fatal(err)
			}
			if len(claims.Items) != tc.wantClaims || len(res.Created) != tc.wantClaims {
				t.Fatalf("%d NodeClaims (%d created), want %d", len(claims.Items), len(res.Created), tc.wantClaims)
			}
			select {
			case ev := <-rec.Events:
				if !strings.Contains(ev, tc.wantEvent) || (tc.wantEvent == "FailedProvisioning" && !strings.Contains(ev, "minValues 3 for karpenter.k8s.aws/instance-family")) {
					t.Errorf("event %q, want %s (naming the minValues)", ev, tc.wantEvent)
				}
			default:
				t.Errorf("no event, want %s", tc.wantEvent)
			}
			if tc.wantClaims == 0 {
				return
			}
			nc := claims.Items[0]
			if got := nc.Annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey]; got != "true" {
				t.Errorf("annotation %s = %q, want \"true\"", karpv1.NodeClaimMinValuesRelaxedAnnotationKey, got)
			}
			for _, r := range nc.Spec.Requirements {
				if r.Key == "karpenter.k8s.aws/instance-family" && (r.MinValues == nil || *r.MinValues != 2) {
					t.Errorf("instance-family requirement %+v: want minValues lowered to 2", r)
				}
			}
		})
	}
}

// TestOptionsMinValuesPolicyDefault: without a policy the provisioner is
// Strict, as Karpenter's --min-values-policy default.
func TestOptionsMinValuesPolicyDefault(t *testing.T) {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "diverse"}}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{{
		Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpExists, MinValues: new(3)}}
	pod := unschedulable(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web"}})
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(np, pod).
		WithIndex(&corev1.Pod{}, clusterstate.PodNodeNameField, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).Build()
	res, err := NewProvisioner(kube, twoFamilies{}, record.NewFakeRecorder(10), nil, Options{}).Schedule(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) != 0 || res.Unschedulable != 1 {
		t.Fatalf("default policy created %v, %d unschedulable; want Strict: none, 1", res.Created, res.Unschedulable)
	}
}
