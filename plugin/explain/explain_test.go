package explain

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	karpxv1 "github.com/karpx/karpx/apis/v1"
)

func nodePool(name string, weight int32, class string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if weight != 0 {
		np.Spec.Weight = &weight
	}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: class}
	np.Spec.Template.Spec.Requirements = reqs
	return np
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

func ec2NodeClass(name string, zones ...string) karpxv1.EC2NodeClass {
	c := karpxv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, z := range zones {
		c.Status.Subnets = append(c.Status.Subnets, karpxv1.Subnet{ID: "subnet-" + z, Zone: z})
	}
	return c
}

func pendingPod(cpu, memory string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-web"},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelArchStable: "amd64"}, Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/0 nodes are available"}}},
	}
}

// snapshot has one NodePool for each way of ruling a pod out, and one
// that fits.
func snapshot() *Snapshot {
	amd64 := req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64")
	tainted := nodePool("gpu", 50, "default", amd64)
	tainted.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	limited := nodePool("limited", 20, "default", amd64)
	limited.Spec.Limits = karpv1.Limits{corev1.ResourceCPU: resource.MustParse("4")}
	arm := nodePool("arm", 10, "default", req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64"))
	orphan := nodePool("orphan", 100, "missing", amd64)
	general := nodePool("general", 0, "default", amd64, req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"))
	claim := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "limited-x", Labels: map[string]string{karpv1.NodePoolLabelKey: "limited"}}}
	claim.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	return &Snapshot{
		Pod:            pendingPod("2", "4Gi"),
		NodePools:      []karpv1.NodePool{*general, *tainted, *limited, *arm, *orphan},
		EC2NodeClasses: []karpxv1.EC2NodeClass{ec2NodeClass("default", "us-east-1a", "us-east-1b")},
		NodeClaims:     []karpv1.NodeClaim{claim},
	}
}

func result(t *testing.T, ex *Explanation, name string) NodePoolResult {
	t.Helper()
	for _, r := range ex.NodePools {
		if r.NodePool == name {
			return r
		}
	}
	t.Fatalf("no result for NodePool %s in %+v", name, ex.NodePools)
	return NodePoolResult{}
}

func TestExplainEachReason(t *testing.T) {
	ex := Explain(snapshot())
	if !ex.Pending || ex.Scheduler != "Unschedulable: 0/0 nodes are available" {
		t.Errorf("pending %v, scheduler %q", ex.Pending, ex.Scheduler)
	}
	for name, want := range map[string]string{
		"gpu":     "nvidia.com/gpu",
		"limited": "limit",
		"arm":     "arm64",
		"orphan":  `EC2NodeClass "missing" not found`,
	} {
		r := result(t, ex, name)
		if r.CanLaunch || !strings.Contains(r.Reason, want) {
			t.Errorf("%s: canLaunch %v, reason %q, want one naming %q", name, r.CanLaunch, r.Reason, want)
		}
	}
	g := result(t, ex, "general")
	if !g.CanLaunch || g.Reason != "" {
		t.Fatalf("general: %+v", g)
	}
	if g.CapacityType != "on-demand" || (g.Zone != "us-east-1a" && g.Zone != "us-east-1b") || g.PriceUSDPerHour <= 0 || g.InstanceType != g.InstanceTypes[0] {
		t.Errorf("general offering: %+v", g)
	}
	if ex.Chosen != "general" {
		t.Errorf("chosen %q, want general (the only NodePool that fits)", ex.Chosen)
	}
	// Sorted by weight: orphan (100) first, general (0) last.
	if ex.NodePools[0].NodePool != "orphan" || ex.NodePools[len(ex.NodePools)-1].NodePool != "general" {
		t.Errorf("order: %+v", ex.NodePools)
	}
	if !strings.Contains(strings.Join(ex.Notes, "\n"), "no EC2 access") {
		t.Errorf("notes lack the catalogue caveat: %v", ex.Notes)
	}
}

// TestExplainChoosesByWeight: with two fitting NodePools the heavier one
// is chosen, as Karpenter does.
func TestExplainChoosesByWeight(t *testing.T) {
	s := snapshot()
	s.NodePools = append(s.NodePools, *nodePool("heavy", 70, "default", req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64")))
	ex := Explain(s)
	if ex.Chosen != "heavy" {
		t.Errorf("chosen %q, want heavy", ex.Chosen)
	}
	if !result(t, ex, "general").CanLaunch {
		t.Error("general no longer fits on its own")
	}
}

// TestExplainTooBig: a pod no catalogue type can hold is ruled out
// everywhere, and nothing is chosen.
func TestExplainTooBig(t *testing.T) {
	s := snapshot()
	s.Pod = pendingPod("4000", "1Gi")
	ex := Explain(s)
	if ex.Chosen != "" || result(t, ex, "general").CanLaunch {
		t.Errorf("a 4000-CPU pod fits: %+v", ex)
	}
}

// TestExplainLimitLeavesRoom is the limit control: with the NodeClaim
// gone, NodePool limited fits.
func TestExplainLimitLeavesRoom(t *testing.T) {
	s := snapshot()
	s.NodeClaims = nil
	if r := result(t, Explain(s), "limited"); !r.CanLaunch {
		t.Errorf("limited without NodeClaims: %+v", r)
	}
}

func TestExplainUnreadyClass(t *testing.T) {
	s := snapshot()
	s.EC2NodeClasses[0].Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "SubnetsNotFound", Message: "no subnet matches"}}
	ex := Explain(s)
	if r := result(t, ex, "general"); r.CanLaunch || !strings.Contains(r.Reason, "not Ready (SubnetsNotFound: no subnet matches)") {
		t.Errorf("general with an unready class: %+v", r)
	}
	if ex.Chosen != "" {
		t.Errorf("chosen %q with every class unready", ex.Chosen)
	}
}

// TestExplainZonesFromNodes: without status.subnets (no controller), zones
// come from the nodes, with a note.
func TestExplainZonesFromNodes(t *testing.T) {
	s := snapshot()
	s.EC2NodeClasses[0].Status.Subnets = nil
	s.Nodes = []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{corev1.LabelTopologyZone: "eu-west-1c"}}}}
	ex := Explain(s)
	if r := result(t, ex, "general"); r.Zone != "eu-west-1c" {
		t.Errorf("zone %q, want the node's eu-west-1c", r.Zone)
	}
	if !strings.Contains(strings.Join(ex.Notes, "\n"), "no status.subnets") {
		t.Errorf("notes: %v", ex.Notes)
	}
}

// podEvent is an event about the pod from source at second sec.
func podEvent(pod *corev1.Pod, source, reason, message string, sec int64) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: pod.Name + "." + reason + "." + source, Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Source:         corev1.EventSource{Component: source},
		Type:           corev1.EventTypeNormal, Reason: reason, Message: message, Count: 1,
		LastTimestamp: metav1.Unix(sec, 0),
	}
}

// TestExplainNotModelled: a NodePool whose class karpx cannot model (the
// kwok provider's KWOKNodeClass) is "unknown", not ruled out, and the
// explanation carries Karpenter's own latest events for the pod, newest
// first, leaving out other sources and other pods.
func TestExplainNotModelled(t *testing.T) {
	s := snapshot()
	kwok := nodePool("kwok", 0, "default", req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "arm64"))
	kwok.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.kwok.sh", Kind: "KWOKNodeClass", Name: "default"}
	s.NodePools = []karpv1.NodePool{*kwok}
	s.EC2NodeClasses = nil
	other := s.Pod.DeepCopy()
	other.Name, other.UID = "other", "uid-other"
	s.Events = []corev1.Event{
		podEvent(s.Pod, "karpenter", "FailedScheduling", "Failed to schedule pod, incompatible with nodepool \"kwok\"", 100),
		podEvent(s.Pod, "karpenter", "Nominated", "Pod should schedule on: nodeclaim/kwok-abcde", 300),
		podEvent(s.Pod, "default-scheduler", "FailedScheduling", "0/1 nodes are available", 400),
		podEvent(other, "karpenter", "Nominated", "Pod should schedule on: nodeclaim/kwok-zzzzz", 500),
		podEvent(s.Pod, "karpx", "Nominated", "Pod should schedule on: nodeclaim/kwok-fghij", 200),
	}
	ex := Explain(s)
	r := result(t, ex, "kwok")
	if !r.NotModelled || r.CanLaunch || strings.Contains(r.Reason, "not explained") || !strings.Contains(r.Reason, "KWOKNodeClass") {
		t.Errorf("kwok: %+v", r)
	}
	if len(ex.NotModelled) != 1 || ex.NotModelled[0] != "kwok" || ex.Chosen != "" {
		t.Errorf("notModelled %v, chosen %q", ex.NotModelled, ex.Chosen)
	}
	var got []string
	for _, e := range ex.AutoscalerEvents {
		got = append(got, e.Source+"/"+e.Reason+"@"+e.LastSeen.UTC().Format("05"))
	}
	want := []string{"karpenter/Nominated@00", "karpx/Nominated@20", "karpenter/FailedScheduling@40"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("autoscaler events %v, want %v", got, want)
	}

	// At most MaxEvents, the newest.
	for i := range MaxEvents + 2 {
		s.Events = append(s.Events, podEvent(s.Pod, "karpenter", "Nominated", "again", int64(1000+i)))
	}
	ex = Explain(s)
	if len(ex.AutoscalerEvents) != MaxEvents || ex.AutoscalerEvents[0].LastSeen.Unix() != int64(1000+MaxEvents+1) {
		t.Errorf("%d events, newest %v", len(ex.AutoscalerEvents), ex.AutoscalerEvents[0].LastSeen)
	}
}

// TestExplainEventsSeries: events.k8s.io events (reportingController,
// series) are read with their series' count and last time.
func TestExplainEventsSeries(t *testing.T) {
	s := snapshot()
	e := podEvent(s.Pod, "", "Nominated", "Pod should schedule on: nodeclaim/x", 0)
	e.ReportingController, e.LastTimestamp = "karpenter", metav1.Time{}
	e.Series = &corev1.EventSeries{Count: 7, LastObservedTime: metav1.NewMicroTime(metav1.Unix(50, 0).Time)}
	s.Events = []corev1.Event{e}
	ex := Explain(s)
	if len(ex.AutoscalerEvents) != 1 || ex.AutoscalerEvents[0].Count != 7 || ex.AutoscalerEvents[0].LastSeen.Unix() != 50 || ex.AutoscalerEvents[0].Source != "karpenter" {
		t.Errorf("events %+v", ex.AutoscalerEvents)
	}
}
