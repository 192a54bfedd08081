package headtohead

import (
	"context"
	"fmt"
	"math/rand"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/scheduling/bench"
)

// Names of the NodePools and of the template label drift changes.
const (
	// PoolName is the NodePool of burst, consolidation, drift and scale to
	// zero.
	PoolName = "h2h"
	// P5PoolName is the WhenEmpty NodePool of the P5 workload.
	P5PoolName = "p5"
	// DriftLabel is the NodePool template label the drift workload
	// changes (from "1" to "2").
	DriftLabel = "karpx.dev/h2h-template"
	// podKey is the label that gives each burst ReplicaSet its own
	// selector.
	podKey = "karpx.dev/h2h-pod"
)

// Disruption settings of the main NodePool, the same for both sides:
// consolidation of empty and underutilised nodes 30 s after their last
// pod change, at most 20% of the nodes disrupted at a time.
const (
	consolidateAfter = "30s"
	disruptionBudget = "20%"
)

// NodePool returns the workloads' NodePool with nodeClassRef, the only
// field that differs between the two sides.
func NodePool(ref karpv1.NodeClassReference) *karpv1.NodePool {
	after := karpv1.MustParseNillableDuration(consolidateAfter)
	never := karpv1.MustParseNillableDuration("Never")
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: PoolName},
		Spec: karpv1.NodePoolSpec{
			Disruption: karpv1.Disruption{
				ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
				ConsolidateAfter:    after,
				Budgets:             []karpv1.Budget{{Nodes: disruptionBudget}},
			},
			Template: karpv1.NodeClaimTemplate{
				ObjectMeta: karpv1.ObjectMeta{Labels: map[string]string{DriftLabel: "1"}},
				Spec: karpv1.NodeClaimTemplateSpec{
					NodeClassRef: &ref,
					ExpireAfter:  never,
					Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
						{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: bench.HeadToHeadInstanceTypes},
						{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
						{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
					},
				},
			},
		},
	}
}

// p5Taint keeps every pod but the P5 workload's off the P5 NodePool's
// nodes: without it, an autoscaler may put burst pods there (Karpenter
// does: both NodePools fit them).
var p5Taint = corev1.Taint{Key: "karpx.dev/p5", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// P5NodePool is the P5 workload's NodePool: WhenEmpty with consolidateAfter
// 30 s as in the field report (aws/karpenter-provider-aws#7523), m5.large
// on-demand, every node disruptable at once, nodes labelled p5=empty and
// tainted karpx.dev/p5=true:NoSchedule.
func P5NodePool(ref karpv1.NodeClassReference) *karpv1.NodePool {
	np := NodePool(ref)
	np.Name = P5PoolName
	np.Spec.Disruption = karpv1.Disruption{
		ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmpty,
		ConsolidateAfter:    karpv1.MustParseNillableDuration("30s"),
		Budgets:             []karpv1.Budget{{Nodes: "100%"}},
	}
	np.Spec.Template.Labels = map[string]string{"p5": "empty"}
	np.Spec.Template.Spec.Taints = []corev1.Taint{p5Taint}
	np.Spec.Template.Spec.Requirements[0].Values = []string{"m5.large"}
	return np
}

// BurstReplicaSets returns n one-replica ReplicaSets whose pods are
// Karpenter's scheduling-benchmark mix (bench.DiversePods: a fifth each of
// generic, zone topology spread, hostname topology spread, zone pod
// affinity and hostname pod anti-affinity; cpu 100m-1500m, memory
// 100Mi-4Gi), deterministic for seed. One ReplicaSet per pod keeps every
// pod's own spec and lets an evicted pod come back, as a Deployment's
// would.
func BurstReplicaSets(n int, seed int64) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, p := range bench.DiversePods(n, seed) {
		labels := map[string]string{WorkloadLabel: "burst", podKey: p.Name}
		for k, v := range p.Labels {
			labels[k] = v
		}
		spec := *p.Spec.DeepCopy()
		spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
		spec.Containers[0].Image = "registry.k8s.io/pause:3.10"
		out = append(out, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: "default", Labels: map[string]string{WorkloadLabel: "burst"}},
			Spec: appsv1.ReplicaSetSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{podKey: p.Name}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
			},
		})
	}
	return out
}

// createAll creates objs, 16 at a time, and returns the first error.
func createAll(ctx context.Context, kube client.Client, objs []*appsv1.ReplicaSet) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, o := range objs {
		g.Go(func() error {
			if err := kube.Create(ctx, o); err != nil {
				return fmt.Errorf("creating ReplicaSet %s: %w", o.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// deleteAll deletes objs (their pods go with them: background
// propagation), 16 at a time, and returns the first error.
func deleteAll(ctx context.Context, kube client.Client, objs []*appsv1.ReplicaSet) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, o := range objs {
		g.Go(func() error {
			if err := kube.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting ReplicaSet %s: %w", o.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// pickFraction returns a seeded random fraction (0-1) of objs, and the
// rest.
func pickFraction(objs []*appsv1.ReplicaSet, fraction float64, seed int64) (picked, rest []*appsv1.ReplicaSet) {
	perm := rand.New(rand.NewSource(seed)).Perm(len(objs))
	n := int(fraction*float64(len(objs)) + 0.5)
	for i, j := range perm {
		if i < n {
			picked = append(picked, objs[j])
		} else {
			rest = append(rest, objs[j])
		}
	}
	return picked, rest
}

// BurstPDB is the PodDisruptionBudget of the drift workload: at most 10%
// of the burst pods unavailable at a time.
func BurstPDB() *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "burst", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromString("10%")),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{WorkloadLabel: "burst"}},
		},
	}
}

// P5Deployment is the P5 workload: replicas pods of 1200m cpu and 256Mi
// (one per m5.large) with preferred hostname anti-affinity, as most Helm
// charts have, in the p5 NodePool.
func P5Deployment(replicas int32) *appsv1.Deployment {
	labels := map[string]string{WorkloadLabel: "p5", "app": "p5"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "p5", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "p5"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					NodeSelector:                  map[string]string{"p5": "empty"},
					Tolerations:                   []corev1.Toleration{{Key: p5Taint.Key, Operator: corev1.TolerationOpEqual, Value: p5Taint.Value, Effect: p5Taint.Effect}},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
							TopologyKey:   corev1.LabelHostname,
							LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "p5"}},
						}}},
					}},
					Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("1200m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
				},
			},
		},
	}
}
