package clusterstate

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// indexer records the indexes registered with it.
type indexer struct {
	fields  map[string]client.IndexerFunc
	failOn  string
	objects map[string]client.Object
}

func (x *indexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	if field == x.failOn {
		return errors.New("indexer conflict")
	}
	x.fields[field] = fn
	x.objects[field] = obj
	return nil
}

func TestIndexFieldsRegistersEveryIndex(t *testing.T) {
	x := &indexer{fields: map[string]client.IndexerFunc{}, objects: map[string]client.Object{}}
	if err := IndexFields(context.Background(), x); err != nil {
		t.Fatal(err)
	}
	const id = "aws:///us-east-1a/i-0123456789abcdef0"
	for _, tt := range []struct {
		field      string
		set, unset client.Object
		want       string
	}{
		{PodNodeNameField, &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}}, &corev1.Pod{}, "n1"},
		{NodeProviderIDField, &corev1.Node{Spec: corev1.NodeSpec{ProviderID: id}}, &corev1.Node{}, id},
		{NodeClaimProviderIDField, &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{ProviderID: id}}, &karpv1.NodeClaim{}, id},
	} {
		fn := x.fields[tt.field]
		if fn == nil {
			t.Errorf("%s not registered", tt.field)
			continue
		}
		if got := fn(tt.set); !slices.Equal(got, []string{tt.want}) {
			t.Errorf("%s of a set object = %q, want [%q]", tt.field, got, tt.want)
		}
		if got := fn(tt.unset); got != nil {
			t.Errorf("%s of an unset object = %q, want none (not indexed)", tt.field, got)
		}
	}
	if len(x.fields) != 3 {
		t.Errorf("registered %d indexes, want 3", len(x.fields))
	}
}

func TestIndexFieldsReturnsTheIndexersError(t *testing.T) {
	for _, field := range []string{PodNodeNameField, NodeProviderIDField, NodeClaimProviderIDField} {
		x := &indexer{fields: map[string]client.IndexerFunc{}, objects: map[string]client.Object{}, failOn: field}
		if err := IndexFields(context.Background(), x); err == nil {
			t.Errorf("IndexFields with %s refused: no error", field)
		}
	}
}

func TestAgentTaintKnowsTheBuiltinAgents(t *testing.T) {
	agent := AgentTaint()
	for key, want := range map[string]bool{
		"node.cilium.io/agent-not-ready":  true,
		"ebs.csi.aws.com/agent-not-ready": true,
		"efs.csi.aws.com/agent-not-ready": true,
		"cni.istio.io/not-ready":          true,
		"example.com/agent-not-ready":     false,
		karpv1.DisruptedTaintKey:          false,
	} {
		if got := agent(corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule}); got != want {
			t.Errorf("AgentTaint(%s) = %t, want %t", key, got, want)
		}
	}
}
