package upstream

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpx/karpx/ec2sim"
)

// TestUpstreamNodeOverlay runs karpx's NodeOverlay scenarios
// (test/e2e/nodeoverlay_test.go, docs/node-overlay.md) on the real
// Karpenter AWS provider with FEATURE_GATES=NodeOverlay=true, the
// differential control of karpx's semantics:
//
//   - price: a NodePool allowing c5.large and m5.large on-demand (EC2's
//     cheaper is c5.large), a NodeOverlay of weight 10 pricing c5.large at
//     $10/h and one of the same weight pricing it at $0.001/h. Karpenter
//     marks the second ValidationSucceeded=False with reason Conflict,
//     the first True, and launches m5.large, as karpx does;
//   - capacity: a NodePool of m5.large whose nodes advertise
//     example.com/fpga (ec2sim's kubelet), and a NodeOverlay adding
//     example.com/fpga: 2 to it: a pod requesting one gets a node and
//     runs, as with karpx.
func TestUpstreamNodeOverlay(t *testing.T) {
	e := startAWSEnv(t, 10*time.Minute, "NodeOverlay=true", nil)
	ctx, c, kube := e.ctx, e.cluster, e.kube

	const fpga = corev1.ResourceName("example.com/fpga")
	fpgaClass := EC2NodeClassYAML("fpga", c.Name, "al2023@latest") + "  tags: {" + ec2sim.BehaviorTagKey + ": \"allocatable=" + string(fpga) + ":2\"}\n"
	overlays := `apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: make-cheap-dear}
spec:
  weight: 10
  price: "10"
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [c5.large]}]
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: a-cheaper-still}
spec:
  weight: 10
  price: "0.001"
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [c5.large]}]
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: fpga}
spec:
  capacity: {example.com/fpga: "2"}
  requirements: [{key: karpenter.sh/nodepool, operator: In, values: [fpga]}]
`
	docs := EC2NodeClassYAML("default", c.Name, "al2023@latest") + "---\n" + fpgaClass + "---\n" + overlays
	if out, err := c.Kubectl(ctx, []byte(docs), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	onlyTypes := func(np *karpv1.NodePool, types ...string) *karpv1.NodePool {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements,
			karpv1.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: types})
		return np
	}
	for _, np := range []*karpv1.NodePool{
		onlyTypes(nodePool("overlay", "default", map[string]string{"overlay": "yes"}), "c5.large", "m5.large"),
		onlyTypes(nodePool("fpga", "fpga", map[string]string{"fpga": "yes"}), "m5.large"),
	} {
		if err := kube.Create(ctx, np); err != nil {
			t.Fatal(err)
		}
	}
	var last map[string]string
	defer func() {
		if t.Failed() {
			t.Logf("last NodeOverlay conditions: %v", last)
		}
	}()
	e.eventually(2*time.Minute, "make-cheap-dear and fpga ValidationSucceeded=True, a-cheaper-still False/Conflict", func(ctx context.Context) (bool, error) {
		var list v1alpha1.NodeOverlayList
		if err := kube.List(ctx, &list); err != nil {
			return false, err
		}
		got := map[string]string{}
		for _, o := range list.Items {
			if cond := o.StatusConditions().Get(v1alpha1.ConditionTypeValidationSucceeded); cond != nil {
				got[o.Name] = string(cond.Status) + "/" + cond.Reason
			}
		}
		// Before the NodePools exist nothing conflicts, so every
		// overlay is True first; wait for the evaluation with them.
		last = got
		return got["make-cheap-dear"] == "True/ValidationSucceeded" && got["a-cheaper-still"] == "False/Conflict" && got["fpga"] == "True/ValidationSucceeded", nil
	})

	web := deployment("web", 1, "500m", map[string]string{"overlay": "yes"})
	job := deployment("fpga", 1, "500m", map[string]string{"fpga": "yes"})
	ctr := &job.Spec.Template.Spec.Containers[0]
	ctr.Resources.Requests[fpga] = resource.MustParse("1")
	ctr.Resources.Limits = corev1.ResourceList{fpga: resource.MustParse("1")}
	for _, d := range []client.Object{web, job} {
		if err := kube.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually(4*time.Minute, "web and fpga Running", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := kube.List(ctx, &pods, client.InNamespace("default")); err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 2, nil
	})
	claims, err := e.claimsOf(ctx, "overlay")
	if err != nil || len(claims) != 1 {
		t.Fatalf("NodeClaims of overlay: %d, %v; want 1", len(claims), err)
	}
	if got := claims[0].Labels[corev1.LabelInstanceTypeStable]; got != "m5.large" {
		t.Errorf("Karpenter launched %s; want m5.large (c5.large priced at $10/h by make-cheap-dear)", got)
	}
	if claims[0].Annotations[v1alpha1.PriceOverlayAppliedAnnotationKey] != "true" {
		t.Errorf("NodeClaim annotations %v; want %s", claims[0].Annotations, v1alpha1.PriceOverlayAppliedAnnotationKey)
	}
	fpgaClaims, err := e.claimsOf(ctx, "fpga")
	if err != nil || len(fpgaClaims) != 1 {
		t.Fatalf("NodeClaims of fpga: %d, %v; want 1", len(fpgaClaims), err)
	}
	q := fpgaClaims[0].Status.Allocatable[fpga]
	t.Logf("scenario node-overlay upstream: Karpenter %s launched %s for overlay (annotated %s) and %s with allocatable %s %s for the fpga pod",
		AWSVersion, claims[0].Labels[corev1.LabelInstanceTypeStable], v1alpha1.PriceOverlayAppliedAnnotationKey,
		fpgaClaims[0].Labels[corev1.LabelInstanceTypeStable], fpga, q.String())
}
