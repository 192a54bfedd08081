package upstream

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// drainApps are the drain scenario's pods on one m5.large node, by app:
// namespace, priority class, DaemonSet or not, replicas. Karpenter v1.14
// evicts them in four tiers (groupPodsByPriority,
// pkg/controllers/node/termination/terminator/terminator.go@v1.14.3):
// non-critical pods, non-critical DaemonSet pods, critical pods,
// critical DaemonSet pods.
var drainApps = []struct {
	app, namespace, priorityClass string
	daemonSet                     bool
	replicas                      int32
}{
	{"plain", "default", "", false, 2},
	{"plain-ds", "default", "", true, 1},
	{"cluster-critical", "kube-system", "system-cluster-critical", false, 1},
	{"node-critical", "kube-system", "system-node-critical", false, 1},
	{"critical-ds", "kube-system", "system-node-critical", true, 1},
}

// TestDifferentialDrainOrder compares the order in which karpx and
// Karpenter evict a node's pods when its NodeClaim is deleted: two
// non-critical pods, a non-critical DaemonSet pod, a
// system-cluster-critical and a system-node-critical pod, and a
// system-node-critical DaemonSet pod (drainApps). The record is the order
// in which the API server reported each pod leaving (its
// deletionTimestamp set, or the pod deleted), grouped into runs of the
// same app kind.
func TestDifferentialDrainOrder(t *testing.T) {
	res := runDiff(t, 10*time.Minute, func(e *diffEnv) map[string]string {
		return e.drainScenario()
	})
	compareDiff(t, "drain order", res)
}

func (e *diffEnv) drainScenario() map[string]string {
	t := e.t
	const pool = "drain"
	e.createPools(diffPool(pool, "m5.large"))
	sel := map[string]string{"diff": pool}
	for _, a := range drainApps {
		labels := map[string]string{"app": a.app}
		spec := corev1.PodSpec{
			NodeSelector:                  sel,
			PriorityClassName:             a.priorityClass,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
		}
		meta := metav1.ObjectMeta{Name: a.app, Namespace: a.namespace}
		tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}
		var obj client.Object
		if a.daemonSet {
			obj = &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
		} else {
			obj = &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(a.replicas), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
		}
		if err := e.kube.Create(e.ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range drainApps {
		e.waitPods(pool, a.namespace, a.app, int(a.replicas))
	}
	claims, err := e.claimsOf(e.ctx, pool)
	if err != nil || len(claims) != 1 {
		t.Fatalf("NodeClaims of %s: %d (%v), want 1 holding every pod", pool, len(claims), err)
	}
	victim := claims[0]
	e.rec.resetPods()
	if err := e.kube.Delete(e.ctx, &victim); err != nil {
		t.Fatal(err)
	}
	e.eventually(2*time.Minute, "NodeClaim "+victim.Name+" gone", func(ctx context.Context) (bool, error) {
		var nc karpv1.NodeClaim
		err := e.kube.Get(ctx, client.ObjectKeyFromObject(&victim), &nc)
		return err != nil, nil
	})
	_, pods := e.rec.snapshot()
	tier := map[string]int{}
	for _, a := range drainApps {
		tier[a.app] = drainTier(a.priorityClass, a.daemonSet)
	}
	type left struct {
		app string
		seq int
	}
	var order []left
	for _, p := range pods {
		if _, ours := tier[p.App]; ours && p.Node == victim.Status.NodeName {
			order = append(order, left{p.App, p.Seq})
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].seq < order[j].seq })
	// Runs of the same tier, apps sorted: the order within a tier is each
	// implementation's own (both evict a tier's pods at once).
	var runs [][]string
	for i, l := range order {
		if i == 0 || tier[order[i-1].app] != tier[l.app] {
			runs = append(runs, nil)
		}
		runs[len(runs)-1] = append(runs[len(runs)-1], l.app)
	}
	var printed []string
	for _, r := range runs {
		sort.Strings(r)
		printed = append(printed, strings.Join(r, "+"))
	}
	t.Logf("%s: pods left Node %s in this order: %v", e.side, victim.Status.NodeName, order)
	return map[string]string{
		"eviction order": strings.Join(printed, " then "),
		"pods evicted":   fmt.Sprint(len(order)),
	}
}

// drainTier is the index of Karpenter's eviction tier of a pod with
// priorityClass, owned by a DaemonSet or not: 0 non-critical, 1
// non-critical DaemonSet, 2 critical, 3 critical DaemonSet.
func drainTier(priorityClass string, daemonSet bool) int {
	i := 0
	if priorityClass == "system-cluster-critical" || priorityClass == "system-node-critical" {
		i = 2
	}
	if daemonSet {
		i++
	}
	return i
}
