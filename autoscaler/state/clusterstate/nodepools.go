package clusterstate

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
)

// NodePoolInputs returns what a pass (provisioning's, or disruption's
// simulation) may launch from: the scheduling input of every NodePool in
// pools that is not being deleted, that admit (when not nil) lets through,
// and whose instance types cloud returns, with its Remaining limits
// computed from claims (all the cluster's NodeClaims); and those instance
// types by NodePool name. A NodePool whose instance types cannot be read is
// left out and passed to failed (when not nil) with the error.
func NodePoolInputs(ctx context.Context, cloud cloudprovider.CloudProvider, pools []karpv1.NodePool, claims []karpv1.NodeClaim,
	admit func(*karpv1.NodePool) bool, failed func(*karpv1.NodePool, error)) ([]scheduling.NodePoolInput, map[string][]*cloudprovider.InstanceType) {
	var inputs []scheduling.NodePoolInput
	typesByPool := map[string][]*cloudprovider.InstanceType{}
	for i := range pools {
		np := &pools[i]
		if !np.DeletionTimestamp.IsZero() || (admit != nil && !admit(np)) {
			continue
		}
		its, err := cloud.GetInstanceTypes(ctx, np)
		if err != nil {
			if failed != nil {
				failed(np, err)
			}
			continue
		}
		typesByPool[np.Name] = its
		inputs = append(inputs, scheduling.NodePoolInput{NodePool: np, InstanceTypes: its, Remaining: Remaining(np, claims)})
	}
	return inputs, typesByPool
}

// Remaining is the NodePool's spec.limits minus the capacity of its
// NodeClaims (their requested resources before launch), per resource (cpu
// in cores, memory in bytes, "nodes" as a count); nil when the pool has no
// limits.
func Remaining(np *karpv1.NodePool, nodeClaims []karpv1.NodeClaim) corev1.ResourceList {
	if len(np.Spec.Limits) == 0 {
		return nil
	}
	left := corev1.ResourceList(np.Spec.Limits).DeepCopy()
	for i := range nodeClaims {
		nc := &nodeClaims[i]
		if nc.Labels[karpv1.NodePoolLabelKey] != np.Name {
			continue
		}
		used := nc.Status.Capacity
		if len(used) == 0 {
			used = nc.Spec.Resources.Requests
		}
		subtract(left, used)
		if _, ok := left["nodes"]; ok {
			subtract(left, corev1.ResourceList{"nodes": *resource.NewQuantity(1, resource.DecimalSI)})
		}
	}
	return left
}

// DaemonSetPods returns one pod per DaemonSet, built from its template, so
// that every new node reserves room for the DaemonSets that will run on it
// (DaemonSetTemplatePods of the listed DaemonSets). It returns the list
// error.
func DaemonSetPods(ctx context.Context, kube client.Reader) ([]*corev1.Pod, error) {
	var list appsv1.DaemonSetList
	if err := kube.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing DaemonSets: %w", err)
	}
	return DaemonSetTemplatePods(list.Items), nil
}

// DaemonSetTemplatePods returns, for each of daemonSets, the pod its
// template would create (name and namespace of the DaemonSet, its
// template's labels and a deep copy of its template's spec): the overhead
// the scheduler (scheduling.Input.DaemonSetPods) reserves on every new
// node, the same for the provisioner, consolidation and kubectl karpx
// explain.
func DaemonSetTemplatePods(daemonSets []appsv1.DaemonSet) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, len(daemonSets))
	for i := range daemonSets {
		ds := &daemonSets[i]
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels},
			Spec:       *ds.Spec.Template.Spec.DeepCopy(),
		})
	}
	return pods
}

// NamespaceLabels returns the labels of every Namespace, by name, for
// scheduling.Input.NamespaceLabels, when some pod in pods has an affinity
// term with a namespaceSelector (scheduling.NeedsNamespaceLabels); nil
// otherwise, without listing, so that the Namespace informer starts only
// with the first such pod. It returns the list error.
func NamespaceLabels(ctx context.Context, kube client.Reader, pods ...[]*corev1.Pod) (map[string]map[string]string, error) {
	if !scheduling.NeedsNamespaceLabels(pods...) {
		return nil, nil
	}
	var list corev1.NamespaceList
	if err := kube.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing Namespaces (for a pod affinity term's namespaceSelector): %w", err)
	}
	out := make(map[string]map[string]string, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = list.Items[i].Labels
	}
	return out, nil
}

// BoundPods returns the pods of every ExistingNode in nodes.
func BoundPods(nodes []scheduling.ExistingNode) []*corev1.Pod {
	var out []*corev1.Pod
	for _, n := range nodes {
		out = append(out, n.Pods...)
	}
	return out
}
