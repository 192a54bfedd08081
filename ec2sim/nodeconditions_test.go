package ec2sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	if i := conditionIndex(n.Status.Conditions, t); i >= 0 {
		return &n.Status.Conditions[i]
	}
	return nil
}

// TestNodeConditionFault: a fault on a node monitoring agent condition
// is posted with its lastTransitionTime and leaves the Node to kwok; a
// fault on Ready takes the Node from kwok and holds Ready=False across
// passes, also after something (kwok) posted Ready=True; clearing hands
// the Node back. Bad faults are refused naming the field, and nothing
// changes.
func TestNodeConditionFault(t *testing.T) {
	env := newKubeEnv(t, Config{MarkReady: true})
	env.launchTemplate(t, "ltx", env.al2023(t, "x86_64"), "")
	in := env.launch(t, "ltx", "m5.large", nil)
	id, name := *in.InstanceId, *in.PrivateDnsName
	env.advance(t, 3*time.Second) // pending 1s + boot 2s
	if n, ok := env.node(t, name); !ok || readyStatus(n) != corev1.ConditionTrue {
		t.Fatal("node did not join Ready")
	}

	since := env.clk.Now().Add(-29 * time.Minute).Truncate(time.Second)
	if err := env.sim.SetNodeCondition(NodeConditionFault{InstanceIDs: []string{id}, Type: "NetworkingReady", Status: corev1.ConditionFalse, Since: since}); err != nil {
		t.Fatal(err)
	}
	env.advance(t, time.Second)
	n, _ := env.node(t, name)
	c := nodeCondition(n, "NetworkingReady")
	if c == nil || c.Status != corev1.ConditionFalse || !c.LastTransitionTime.Time.Equal(since) || c.Reason != "SimulatedFault" {
		t.Fatalf("NetworkingReady = %+v, want False since %s", c, since)
	}
	if n.Annotations[KwokNodeAnnotation] != "fake" || readyStatus(n) != corev1.ConditionTrue {
		t.Fatalf("a NetworkingReady fault took the Node from kwok: annotations %v, Ready %s", n.Annotations, readyStatus(n))
	}

	if err := env.sim.SetNodeCondition(NodeConditionFault{InstanceIDs: []string{id}, Type: corev1.NodeReady, Status: corev1.ConditionFalse}); err != nil {
		t.Fatal(err)
	}
	readySince := env.clk.Now().Truncate(time.Second)
	env.advance(t, time.Second)
	n, _ = env.node(t, name)
	if _, kwok := n.Annotations[KwokNodeAnnotation]; kwok || n.Annotations[KwokStatusAnnotation] != KwokStatusCustom || readyStatus(n) != corev1.ConditionFalse {
		t.Fatalf("Ready fault: annotations %v, Ready %s; want no kwok annotation and False", n.Annotations, readyStatus(n))
	}
	// kwok (or anything) posts Ready=True: the next pass puts the fault back
	// with its first transition time.
	nodeCondition(n, corev1.NodeReady).Status = corev1.ConditionTrue
	if err := env.kube.Status().Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	env.advance(t, time.Minute)
	n, _ = env.node(t, name)
	if c := nodeCondition(n, corev1.NodeReady); c.Status != corev1.ConditionFalse || !c.LastTransitionTime.Time.Equal(readySince) {
		t.Fatalf("Ready after a pass = %+v, want False since %s", c, readySince)
	}
	if c := nodeCondition(n, "NetworkingReady"); c == nil || !c.LastTransitionTime.Time.Equal(since) {
		t.Fatalf("NetworkingReady lost its transition time: %+v", c)
	}

	for name, bad := range map[string]NodeConditionFault{
		"no instance":   {Type: corev1.NodeReady, Status: corev1.ConditionFalse},
		"no type":       {InstanceIDs: []string{id}, Status: corev1.ConditionFalse},
		"bad status":    {InstanceIDs: []string{id}, Type: "KernelReady", Status: "false"},
		"ready true":    {InstanceIDs: []string{id}, Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		"future since":  {InstanceIDs: []string{id}, Type: "KernelReady", Status: corev1.ConditionFalse, Since: env.clk.Now().Add(time.Hour)},
		"unknown (too)": {InstanceIDs: []string{id, "i-0000000000000dead"}, Type: "KernelReady", Status: corev1.ConditionFalse},
	} {
		err := env.sim.SetNodeCondition(bad)
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
		if name == "unknown (too)" && !errors.Is(err, ErrUnknownInstance) {
			t.Errorf("%s: %v, want ErrUnknownInstance", name, err)
		}
	}
	env.advance(t, time.Second)
	if n, _ = env.node(t, name); nodeCondition(n, "KernelReady") != nil {
		t.Fatal("a refused fault was posted")
	}

	env.sim.ClearNodeConditions(id)
	env.advance(t, time.Second)
	n, _ = env.node(t, name)
	if _, custom := n.Annotations[KwokStatusAnnotation]; n.Annotations[KwokNodeAnnotation] != "fake" || custom || readyStatus(n) != corev1.ConditionTrue {
		t.Fatalf("after clearing: annotations %v, Ready %s; want the Node back with kwok, Ready", n.Annotations, readyStatus(n))
	}
}

// TestNodeConditionAdmin: POST /_sim/node-conditions answers 204, 404 for
// an unknown instance and 400 for a bad body; DELETE clears.
func TestNodeConditionAdmin(t *testing.T) {
	env := newKubeEnv(t, Config{MarkReady: true})
	env.launchTemplate(t, "ltx", env.al2023(t, "x86_64"), "")
	in := env.launch(t, "ltx", "m5.large", nil)
	id, name := *in.InstanceId, *in.PrivateDnsName
	env.advance(t, 3*time.Second)
	post := func(body any) int {
		b, _ := json.Marshal(body)
		resp, err := http.Post(env.endpoint+"/_sim/node-conditions", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(map[string]any{"instanceIds": []string{id}, "type": "Ready", "status": "Unknown"}); got != http.StatusNoContent {
		t.Fatalf("POST = %d, want 204", got)
	}
	if got := post(map[string]any{"instanceIds": []string{"i-0000000000000dead"}, "type": "Ready", "status": "Unknown"}); got != http.StatusNotFound {
		t.Fatalf("POST unknown instance = %d, want 404", got)
	}
	if got := post(map[string]any{"instanceIds": []string{id}, "type": "Ready", "status": "Broken"}); got != http.StatusBadRequest {
		t.Fatalf("POST bad status = %d, want 400", got)
	}
	if got := post(map[string]any{"instanceIds": []string{id}, "kind": "Ready"}); got != http.StatusBadRequest {
		t.Fatalf("POST unknown field = %d, want 400", got)
	}
	env.advance(t, time.Second)
	if n, _ := env.node(t, name); readyStatus(n) != corev1.ConditionUnknown {
		t.Fatalf("Ready %s after the POST, want Unknown", readyStatus(n))
	}
	req, _ := http.NewRequest(http.MethodDelete, env.endpoint+"/_sim/node-conditions?instanceId="+id, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE = %d, want 204", resp.StatusCode)
	}
	env.advance(t, time.Second)
	if n, _ := env.node(t, name); readyStatus(n) != corev1.ConditionTrue {
		t.Fatalf("Ready %s after the DELETE, want True", readyStatus(n))
	}
}
