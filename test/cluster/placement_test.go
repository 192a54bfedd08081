package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// The controller Deployment of manifests/controller (the chart's defaults)
// never runs on a node that a NodePool launched (karpenter.sh/nodepool), so
// that consolidation, drift or expiry of such a node cannot drain the
// autoscaler itself, and spreads its replicas over nodes. Checked with the
// real kube-scheduler on kwok Nodes: two plain Nodes in two zones and one
// launched Node.
//   - default: both replicas Running, on the two plain Nodes;
//   - only the launched Node schedulable: both replicas stay Pending, the
//     scheduler reporting them Unschedulable;
//   - control, the same Deployment without the chart's affinity and spread
//     (the chart's defaults before they were set): both replicas Running on
//     the launched Node, which the default prevents.
func TestControllerStaysOffNodesANodePoolLaunched(t *testing.T) {
	c := StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	var deploy *appsv1.Deployment
	for _, obj := range build(t, "controller") {
		if d, ok := obj.(*appsv1.Deployment); ok {
			deploy = d
		}
	}
	if deploy == nil {
		t.Fatal("manifests/controller has no Deployment")
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deploy.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: deploy.Spec.Template.Spec.ServiceAccountName, Namespace: deploy.Namespace}}
	if _, err := kube.CoreV1().ServiceAccounts(deploy.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := func(name, zone string, launched bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: zone},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
				corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}}}
		n.Status.Capacity = n.Status.Allocatable
		if launched {
			n.Labels["karpenter.sh/nodepool"] = "default"
		}
		return n
	}
	for _, n := range []*corev1.Node{node("plain-a", "us-east-1a", false), node("plain-b", "us-east-1b", false), node("launched", "us-east-1a", true)} {
		if _, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	replicas := int(*deploy.Spec.Replicas)
	pods := func() []corev1.Pod {
		list, err := kube.CoreV1().Pods(deploy.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=karpx-controller"})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	// run creates d, waits until done(pods) holds, returns the pods and
	// deletes d and its pods.
	run := func(d *appsv1.Deployment, what string, done func([]corev1.Pod) bool) []corev1.Pod {
		t.Helper()
		if _, err := kube.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var last []corev1.Pod
		if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(context.Context) (bool, error) {
			last = pods()
			return len(last) == replicas && done(last), nil
		}); err != nil {
			rs, _ := kube.AppsV1().ReplicaSets(d.Namespace).List(context.Background(), metav1.ListOptions{})
			var conds []appsv1.ReplicaSetCondition
			for _, r := range rs.Items {
				conds = append(conds, r.Status.Conditions...)
			}
			events, _ := kube.CoreV1().Events(d.Namespace).List(context.Background(), metav1.ListOptions{})
			var msgs []string
			for _, e := range events.Items {
				msgs = append(msgs, e.InvolvedObject.Kind+" "+e.Reason+": "+e.Message)
			}
			t.Fatalf("%s: %v; pods: %s; ReplicaSet conditions: %+v; events: %q", what, err, describe(last), conds, msgs)
		}
		fg := metav1.DeletePropagationForeground
		if err := kube.AppsV1().Deployments(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
			t.Fatal(err)
		}
		if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(context.Context) (bool, error) {
			_, err := kube.AppsV1().Deployments(d.Namespace).Get(ctx, d.Name, metav1.GetOptions{})
			return err != nil && len(pods()) == 0, nil
		}); err != nil {
			t.Fatalf("%s: Deployment not deleted: %v", what, err)
		}
		return last
	}
	allRunning := func(ps []corev1.Pod) bool {
		for _, p := range ps {
			if p.Status.Phase != corev1.PodRunning {
				return false
			}
		}
		return true
	}
	allUnschedulable := func(ps []corev1.Pod) bool {
		for _, p := range ps {
			unschedulable := false
			for _, cond := range p.Status.Conditions {
				unschedulable = unschedulable || (cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable)
			}
			if !unschedulable {
				return false
			}
		}
		return true
	}

	got := run(deploy.DeepCopy(), "default", allRunning)
	nodes := map[string]bool{}
	for _, p := range got {
		if p.Spec.NodeName == "launched" {
			t.Errorf("default: pod %s runs on the Node a NodePool launched", p.Name)
		}
		nodes[p.Spec.NodeName] = true
	}
	if len(nodes) != replicas {
		t.Errorf("default: %d replicas on Nodes %v, want one per Node", replicas, nodes)
	}

	for _, name := range []string{"plain-a", "plain-b"} {
		if _, err := kube.CoreV1().Nodes().Patch(ctx, name, "application/merge-patch+json", []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range run(deploy.DeepCopy(), "only the launched Node schedulable", allUnschedulable) {
		if p.Spec.NodeName != "" {
			t.Errorf("only the launched Node schedulable: pod %s bound to %s", p.Name, p.Spec.NodeName)
		}
	}

	control := deploy.DeepCopy()
	control.Spec.Template.Spec.Affinity = nil
	control.Spec.Template.Spec.TopologySpreadConstraints = nil
	for _, p := range run(control, "control without the affinity and spread", allRunning) {
		if p.Spec.NodeName != "launched" {
			t.Errorf("control: pod %s on %s, want the launched Node (the only schedulable one)", p.Name, p.Spec.NodeName)
		}
	}
}

// describe prints each pod's node, phase and PodScheduled condition.
func describe(pods []corev1.Pod) string {
	out := ""
	for _, p := range pods {
		sched := ""
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled {
				sched = fmt.Sprintf("%s/%s %s", cond.Status, cond.Reason, cond.Message)
			}
		}
		out += fmt.Sprintf("\n  %s node=%q phase=%s scheduled=%s", p.Name, p.Spec.NodeName, p.Status.Phase, sched)
	}
	return out
}
