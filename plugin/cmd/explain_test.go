package cmd

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	karpxv1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/plugin/cluster"
)

func explainFactory(objs ...client.Object) *cluster.StaticFactory {
	f := testFactory(nil)
	f.ClientValue = fake.NewClientBuilder().WithScheme(f.SchemeValue).WithObjects(objs...).
		WithIndex(&corev1.Event{}, "involvedObject.uid", eventUID).Build()
	return f
}

// eventUID indexes events as the API server's involvedObject.uid field
// selector does.
func eventUID(o client.Object) []string {
	return []string{string(o.(*corev1.Event).InvolvedObject.UID)}
}

func explainObjects(arch string) []client.Object {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}},
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
	}
	class := &karpxv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	class.Status.Subnets = []karpxv1.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "u1"},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelArchStable: "amd64"},
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	return []client.Object{np, class, pod}
}

func TestExplainCommand(t *testing.T) {
	f := explainFactory(explainObjects("amd64")...)
	out, errOut, err := execute(t, f, "explain", "pod", "web", "-n", "shop")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	for _, s := range []string{"Pod shop/web is pending", "NODEPOOL", "general", "yes (chosen)", "us-east-1a", "on-demand",
		"Would launch from NodePool general (karpx's scheduling, highest weight first): ", "Note: instance types and on-demand prices are from karpx's built-in EC2 catalogue"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if ExitCode(err) != ExitOK {
		t.Errorf("exit %d", ExitCode(err))
	}

	out, _, err = execute(t, f, "explain", "pod", "web", "-n", "shop", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var ex struct {
		Kind      string
		Chosen    string
		NodePools []struct {
			NodePool     string
			CanLaunch    bool
			InstanceType string
		}
	}
	if err := json.Unmarshal([]byte(out), &ex); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if ex.Kind != "PodExplanation" || ex.Chosen != "general" || len(ex.NodePools) != 1 || !ex.NodePools[0].CanLaunch || ex.NodePools[0].InstanceType == "" {
		t.Errorf("-o json: %+v", ex)
	}
	if out, _, err := execute(t, f, "explain", "pod", "web", "-n", "shop", "-o", "name"); err != nil || out != "pod/web\n" {
		t.Errorf("-o name = %q, %v", out, err)
	}
	if out, _, err := execute(t, f, "explain", "pod", "web", "-n", "shop", "-o", "yaml"); err != nil || !strings.Contains(out, "kind: PodExplanation") {
		t.Errorf("-o yaml = %q, %v", out, err)
	}
	if out, _, err := execute(t, f, "explain", "pod", "web", "-n", "shop", "-o", "wide"); err != nil || !strings.Contains(out, "NODECLASS") {
		t.Errorf("-o wide = %q, %v", out, err)
	}
}

func TestExplainExitCodes(t *testing.T) {
	// The NodePool allows only arm64; the pod needs amd64.
	f := explainFactory(explainObjects("arm64")...)
	out, errOut, err := execute(t, f, "explain", "pod", "web", "-n", "shop")
	if ExitCode(err) != ExitNegative {
		t.Errorf("unschedulable pod: exit %d (%v), want %d", ExitCode(err), err, ExitNegative)
	}
	if !strings.Contains(out, "No NodePool can launch a node for this pod.") || !strings.Contains(out, "arm64") {
		t.Errorf("output:\n%s", out)
	}
	if !strings.Contains(errOut, "error: no NodePool can launch a node for pod shop/web") {
		t.Errorf("stderr = %q", errOut)
	}

	for args, want := range map[string]int{
		"explain web":                      ExitUsage,
		"explain pod":                      ExitUsage,
		"explain pod web -n shop -o table": ExitUsage,
		"explain pod Bad_Name":             ExitUsage,
		"status --bogus":                   ExitUsage,
		"bogus":                            ExitUsage,
		"explain pod missing -n shop":      ExitError,
	} {
		_, _, err := execute(t, f, strings.Fields(args)...)
		if got := ExitCode(err); got != want {
			t.Errorf("%s: exit %d (%v), want %d", args, got, err, want)
		}
	}
}

// TestExplainKWOKNodeClass: on a cluster run by upstream Karpenter's kwok
// provider the NodePool's class is a KWOKNodeClass. explain does not stop
// at "not explained": it exits 0, marks the NodePool unknown and prints
// Karpenter's own latest events for the pod.
func TestExplainKWOKNodeClass(t *testing.T) {
	objs := explainObjects("amd64")
	np := objs[0].(*karpv1.NodePool)
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	pod := objs[2].(*corev1.Pod)
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.1", Namespace: "shop"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web", Namespace: "shop", UID: pod.UID},
		Source:         corev1.EventSource{Component: "karpenter"}, Type: corev1.EventTypeNormal, Reason: "Nominated",
		Message: "Pod should schedule on: nodeclaim/general-abcde", Count: 1, LastTimestamp: metav1.Unix(1700000000, 0),
	}
	f := testFactory(nil)
	f.ClientValue = fake.NewClientBuilder().WithScheme(f.SchemeValue).WithObjects(np, objs[1], pod, ev).
		WithIndex(&corev1.Event{}, "involvedObject.uid", eventUID).Build()
	out, errOut, err := execute(t, f, "explain", "pod", "web", "-n", "shop")
	if err != nil {
		t.Fatalf("exit %d: %v\n%s\n%s", ExitCode(err), err, out, errOut)
	}
	for _, s := range []string{"unknown", "karpx cannot model NodePool general", "The autoscaler's latest events for this pod",
		"2023-11-14T22:13:20Z", "karpenter", "Nominated", "Pod should schedule on: nodeclaim/general-abcde"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	for _, s := range []string{"not explained", "No NodePool can launch", "events unavailable"} {
		if strings.Contains(out, s) {
			t.Errorf("output has %q:\n%s", s, out)
		}
	}
	out, _, err = execute(t, f, "explain", "pod", "web", "-n", "shop", "-o", "json")
	var ex struct {
		NotModelled      []string
		AutoscalerEvents []struct{ Reason, Message string }
	}
	if err != nil || json.Unmarshal([]byte(out), &ex) != nil || len(ex.NotModelled) != 1 || len(ex.AutoscalerEvents) != 1 || ex.AutoscalerEvents[0].Reason != "Nominated" {
		t.Errorf("-o json: %v\n%s", err, out)
	}
}
