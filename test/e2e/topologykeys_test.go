package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Keys of the topology-keys scenario: an instance type label and a custom
// NodePool requirement key.
const (
	topoFamilyKey = "karpenter.k8s.aws/instance-family"
	topoRackKey   = "example.com/rack"
)

// topologyKeysPool is NodePool topo-<scenario>: three instance families
// and three values of a custom label key; each scenario's pods select
// their own NodePool by its template label topo=<scenario>, so that the
// kube-scheduler's spread domains (nodes matching the pod's node
// selector) are the scenario's nodes only.
func topologyKeysPool(scenario string) string {
	return nodePool{Name: "topo-" + scenario, NodeClass: "topo", Disruption: neverConsolidate, Labels: map[string]string{"topo": scenario},
		CapacityTypes: []string{onDemand}, Requirements: []string{
			inRequirement(topoFamilyKey, "c5", "m5", "r5"),
			inRequirement(topoRackKey, "r1", "r2", "r3"),
		}}.yaml()
}

// spreadDeployment is a Deployment of replicas pods on NodePool
// topo-<name>, spread over key with maxSkew 1, DoNotSchedule. Each pod
// requests 1500m: a node of the smallest size (2 vCPUs) holds one, so the
// kube-scheduler cannot pile pods onto the first node up whatever order
// the nodes come in.
func spreadDeployment(name string, replicas int32, key string) client.Object {
	d := deployment(name, replicas, "1500m", "256Mi")
	d.Spec.Template.Spec.NodeSelector = map[string]string{"topo": name}
	d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
	}}
	return d
}

// domainsOfApp returns, per Running pod of app, the value of key on its
// Node.
func (e *env) domainsOfApp(ctx context.Context, app, key string) ([]string, error) {
	var pods corev1.PodList
	if err := e.kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
			continue
		}
		var node corev1.Node
		if err := e.kube.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node); err != nil {
			return nil, err
		}
		out = append(out, node.Labels[key])
	}
	slices.Sort(out)
	return out, nil
}

// TestTopologyKeys: on the real API server and kube-scheduler, karpx
// honours topology constraints on keys other than zone, hostname and
// capacity type, and namespaceSelector, as Karpenter v1.14 does:
//
//   - a pod whose hostname anti-affinity selects, by namespaceSelector,
//     the namespace of a pod on the one node there is (with room for it)
//     gets a node of its own and runs;
//   - a 3-replica Deployment spread (DoNotSchedule, maxSkew 1) on
//     karpenter.k8s.aws/instance-family over a NodePool allowing c5, m5
//     and r5 gets one node per family, every pod Running;
//   - the same on a custom NodePool requirement key (example.com/rack),
//     whose value the NodeClaims carry as a label.
//
// The control is the old behaviour: the constraints were dropped when
// provisioning, so the spread pods got three nodes of the cheapest family
// (or all with the rack value r1), which the kube-scheduler, seeing one
// domain, fills; and the anti-affinity pod was planned onto the existing
// node it may not join (it stays pending). test/upstream's TestUpstreamTopologyKeys runs the same
// manifests on Karpenter's kwok provider and asserts the same outcomes.
func TestTopologyKeys(t *testing.T) {
	runInParallel(t)
	e := newEnv(t, "karpx-topokeys")
	e.apply(ec2NodeClassYAML("topo", e.name), topologyKeysPool("ns"), topologyKeysPool("family"), topologyKeysPool("rack"))

	// namespaceSelector: a db pod in a namespace labelled tier=storage on
	// its own node, then an api pod whose hostname anti-affinity selects
	// app=db pods in namespaces labelled tier=storage.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "storage", Labels: map[string]string{"tier": "storage"}}}
	if err := e.kube.Create(e.ctx, ns); err != nil {
		t.Fatal(err)
	}
	db := deployment("db", 1, "250m", "256Mi")
	db.Namespace = ns.Name
	db.Spec.Template.Spec.NodeSelector = map[string]string{"topo": "ns"}
	if err := e.kube.Create(e.ctx, db); err != nil {
		t.Fatal(err)
	}
	dbNode := ""
	e.eventually(150*time.Second, "db Running", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := e.kube.List(ctx, &pods, client.InNamespace(ns.Name), client.MatchingLabels{"app": "db"}); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				dbNode = p.Spec.NodeName
				return true, nil
			}
		}
		return false, nil
	})
	api := deployment("api", 1, "250m", "256Mi")
	api.Spec.Template.Spec.NodeSelector = map[string]string{"topo": "ns"}
	api.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			TopologyKey:       corev1.LabelHostname,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "storage"}},
		}},
	}}
	if err := e.kube.Create(e.ctx, api); err != nil {
		t.Fatal(err)
	}
	apiNode := ""
	e.eventually(150*time.Second, "api Running", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := e.kube.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": "api"}); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				apiNode = p.Spec.NodeName
				return true, nil
			}
		}
		return false, nil
	})
	if apiNode == dbNode {
		t.Errorf("api runs on db's node %s despite its anti-affinity", apiNode)
	}
	scenarioLogf(t, "scenario topology keys: namespaceSelector anti-affinity: db on %s, api on %s (%d NodeClaims)", dbNode, apiNode, len(e.nodeClaims()))
	for _, tc := range []struct{ app, key string }{{"family", topoFamilyKey}, {"rack", topoRackKey}} {
		if err := e.kube.Create(e.ctx, spreadDeployment(tc.app, 3, tc.key)); err != nil {
			t.Fatal(err)
		}
		var got []string
		e.eventually(150*time.Second, tc.app+": 3 pods Running", func(ctx context.Context) (bool, error) {
			var err error
			got, err = e.domainsOfApp(ctx, tc.app, tc.key)
			return len(got) == 3, err
		})
		if want := map[string][]string{"family": {"c5", "m5", "r5"}, "rack": {"r1", "r2", "r3"}}[tc.app]; !slices.Equal(got, want) {
			t.Errorf("%s: nodes' %s of the 3 pods = %v, want one each of %v", tc.app, tc.key, got, want)
		}
		scenarioLogf(t, "scenario topology keys: spread on %s put the 3 pods on nodes with %v", tc.key, got)
	}

	if err := consistent(e); err != nil {
		t.Error(fmt.Errorf("after the scenario: %w", err))
	}
}
