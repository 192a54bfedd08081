package explain

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	karpxv1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/providers/capacityreservation/reservationreport"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/nodeoverlay"
	"github.com/karpx/karpx/autoscaler/scheduling"
	"github.com/karpx/karpx/autoscaler/state/clusterstate"
	"github.com/karpx/karpx/catalog"
)

// CatalogNote is the note every explanation carries: where instance types
// and prices come from when the plugin cannot ask EC2.
const CatalogNote = "instance types and on-demand prices are from karpx's built-in EC2 catalogue (the plugin has no EC2 access): " +
	"every offering is assumed available (no ICE), spot is priced at the on-demand price (an upper bound), " +
	"and the EC2NodeClass's AMIs are not checked against the types"

// Snapshot is what Explain reads: the cluster objects that decide where a
// pod can go.
type Snapshot struct {
	// Pod is the pod to explain.
	Pod *corev1.Pod
	// NodePools are all karpenter.sh/v1 NodePools.
	NodePools []karpv1.NodePool
	// EC2NodeClasses are all karpenter.k8s.aws/v1 EC2NodeClasses.
	EC2NodeClasses []karpxv1.EC2NodeClass
	// NodeOverlays are all karpenter.sh/v1alpha1 NodeOverlays. Explain
	// applies them as the autoscaler does (package autoscaler/nodeoverlay)
	// once its controller has evaluated them (an overlay carries the
	// ValidationSucceeded condition); until then they are listed only.
	NodeOverlays []v1alpha1.NodeOverlay
	// NodeClaims count against their NodePool's spec.limits as they do
	// for the scheduler (clusterstate.Remaining): status.capacity once
	// launched, spec.resources.requests while launching.
	NodeClaims []karpv1.NodeClaim
	// Nodes give zones when no EC2NodeClass reports its subnets.
	Nodes []corev1.Node
	// DaemonSetPods are one pod per DaemonSet (its template), whose
	// requests every new node must hold.
	DaemonSetPods []*corev1.Pod
	// Events are the pod's events (any source); Explain keeps the
	// autoscalers' (AutoscalerSources).
	Events []corev1.Event
	// Reservations are the karpx controller's capacity reservation
	// counts (reservationreport.HandlerPath); nil when it did not answer.
	Reservations *reservationreport.Report
	// Notes are added to the Explanation (parts of the cluster that could
	// not be read).
	Notes []string
}

// AutoscalerSources are the event sources (source.component, or
// reportingController for events.k8s.io events) whose events about the pod
// an explanation shows: upstream Karpenter records as "karpenter" (AppName
// in sigs.k8s.io/karpenter/pkg/operator), karpx's controller as "karpx".
var AutoscalerSources = []string{"karpenter", "karpx"}

// MaxEvents is how many of the autoscalers' latest events about the pod an
// explanation keeps.
const MaxEvents = 5

// PodEvent is one event an autoscaler recorded about the pod: a
// nomination (Nominated: "Pod should schedule on: nodeclaim/…") or a
// scheduling failure (FailedScheduling), for example.
type PodEvent struct {
	// Source is the recording component ("karpenter", "karpx").
	Source string `json:"source"`
	// Type is Normal or Warning.
	Type string `json:"type"`
	// Reason is the event's reason (Nominated, FailedScheduling, …).
	Reason string `json:"reason"`
	// Message is the event's message.
	Message string `json:"message"`
	// Count is how many times it was recorded (1 when not counted).
	Count int32 `json:"count"`
	// LastSeen is when it was last recorded.
	LastSeen metav1.Time `json:"lastSeen"`
}

// autoscalerEvents returns the events of AutoscalerSources about pod among
// events, newest first, at most MaxEvents.
func autoscalerEvents(pod *corev1.Pod, events []corev1.Event) []PodEvent {
	var out []PodEvent
	for _, e := range events {
		if e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.Name != pod.Name || e.InvolvedObject.Namespace != pod.Namespace ||
			(pod.UID != "" && e.InvolvedObject.UID != "" && e.InvolvedObject.UID != pod.UID) {
			continue
		}
		source := e.ReportingController
		if source == "" {
			source = e.Source.Component
		}
		if !slices.Contains(AutoscalerSources, source) {
			continue
		}
		seen := e.LastTimestamp
		switch {
		case e.Series != nil && !e.Series.LastObservedTime.IsZero():
			seen = metav1.NewTime(e.Series.LastObservedTime.Time)
		case seen.IsZero() && !e.EventTime.IsZero():
			seen = metav1.NewTime(e.EventTime.Time)
		case seen.IsZero():
			seen = e.FirstTimestamp
		}
		count := max(e.Count, 1)
		if e.Series != nil {
			count = max(e.Series.Count, 1)
		}
		out = append(out, PodEvent{Source: source, Type: e.Type, Reason: e.Reason, Message: e.Message, Count: count, LastSeen: seen})
	}
	slices.SortStableFunc(out, func(a, b PodEvent) int { return b.LastSeen.Compare(a.LastSeen.Time) })
	if len(out) > MaxEvents {
		out = out[:MaxEvents]
	}
	return out
}

// Explanation is what `kubectl karpx explain pod` prints; -o json|yaml
// print it as kind PodExplanation.
type Explanation struct {
	// Pod is "namespace/name".
	Pod string `json:"pod"`
	// Pending is true when the pod is not bound to a node.
	Pending bool `json:"pending"`
	// NodeName is the node the pod is bound to, if any.
	NodeName string `json:"nodeName,omitempty"`
	// Scheduler is the kube-scheduler's PodScheduled=False message, if any.
	Scheduler string `json:"scheduler,omitempty"`
	// Chosen is the NodePool karpx's scheduling would launch from with all
	// NodePools considered (by weight, then name); "" when none can.
	Chosen string `json:"chosen,omitempty"`
	// NotModelled are the NodePools whose node class karpx cannot model
	// (any nodeClassRef but a karpenter.k8s.aws EC2NodeClass, such as
	// Karpenter's kwok provider's KWOKNodeClass): whether they can launch
	// for the pod is the autoscaler's to say, in AutoscalerEvents.
	NotModelled []string `json:"notModelled,omitempty"`
	// AutoscalerEvents are Karpenter's and karpx's latest events about the
	// pod (nominations, scheduling failures), newest first, at most
	// MaxEvents.
	AutoscalerEvents []PodEvent `json:"autoscalerEvents,omitempty"`
	// NodePools is one result per NodePool, by descending weight then name.
	NodePools []NodePoolResult `json:"nodePools"`
	// NodeOverlays is one result per NodeOverlay, in the order they are
	// evaluated (weight descending, then name descending).
	NodeOverlays []NodeOverlayResult `json:"nodeOverlays,omitempty"`
	// Reservations are the capacity reservations of the NodePools'
	// EC2NodeClasses (status.capacityReservations) with their free and
	// total places.
	Reservations []ReservationResult `json:"reservations,omitempty"`
	// Notes say which inputs were assumed or unavailable.
	Notes []string `json:"notes"`
}

// NodePoolResult is what one NodePool could do for the pod on its own.
type NodePoolResult struct {
	// NodePool is the NodePool's name.
	NodePool string `json:"nodePool"`
	// Weight is spec.weight (0 when unset).
	Weight int32 `json:"weight"`
	// NodeClass is the nodeClassRef's name.
	NodeClass string `json:"nodeClass"`
	// CanLaunch is true when the NodePool could launch a node for the pod.
	CanLaunch bool `json:"canLaunch"`
	// NotModelled is true when karpx cannot model the NodePool's node
	// class, so CanLaunch is unknown rather than false.
	NotModelled bool `json:"notModelled,omitempty"`
	// Reason says what ruled the NodePool out (requirement, taint, limit,
	// missing or unready EC2NodeClass); empty when CanLaunch.
	Reason string `json:"reason,omitempty"`
	// InstanceType, Zone, CapacityType and PriceUSDPerHour are the
	// cheapest offering the node would be launched with (USD per hour).
	InstanceType    string  `json:"instanceType,omitempty"`
	Zone            string  `json:"zone,omitempty"`
	CapacityType    string  `json:"capacityType,omitempty"`
	PriceUSDPerHour float64 `json:"priceUSDPerHour,omitempty"`
	// InstanceTypes are the types the launch would offer EC2, cheapest
	// first (at most scheduling.MaxInstanceTypes).
	InstanceTypes []string `json:"instanceTypes,omitempty"`
	// PriceOverlay names the NodeOverlay that set PriceUSDPerHour (its
	// spec.price or spec.priceAdjustment); empty for the catalogue price.
	PriceOverlay string `json:"priceOverlay,omitempty"`
	// CatalogPriceUSDPerHour is the offering's price before PriceOverlay
	// (USD per hour); set only with PriceOverlay.
	CatalogPriceUSDPerHour float64 `json:"catalogPriceUSDPerHour,omitempty"`
	// CapacityOverlays names, per extended resource a NodeOverlay added to
	// InstanceType, that NodeOverlay.
	CapacityOverlays map[corev1.ResourceName]string `json:"capacityOverlays,omitempty"`
}

// NodeOverlayResult is one NodeOverlay as explain evaluated it, with what
// the autoscaler's controller last wrote on it.
type NodeOverlayResult struct {
	// Name is the NodeOverlay's name.
	Name string `json:"name"`
	// Weight is spec.weight (0 when unset).
	Weight int32 `json:"weight"`
	// Applied is true when explain applied it (validated, no conflict, and
	// the controller has evaluated the overlays).
	Applied bool `json:"applied"`
	// Reason and Message are why it does not apply: Conflict or
	// RuntimeValidation (Karpenter's reasons) as explain evaluated it.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Condition is the ValidationSucceeded condition the controller wrote
	// ("True", "False: Conflict", …), or "" when it has not evaluated it.
	Condition string `json:"condition,omitempty"`
}

// NodeOverlayNote is the note of an explanation whose NodeOverlays no
// controller has evaluated.
const NodeOverlayNote = "no NodeOverlay has a ValidationSucceeded condition: the autoscaler has not evaluated them (karpx runs NodeOverlays only with --feature-gates NodeOverlay=true), so prices and capacities are shown without them"

// overlays evaluates s.NodeOverlays against the catalogue types of every
// modelled NodePool and returns the evaluation to apply (nil when the
// controller has evaluated none of them) and the per-overlay results.
func (s *Snapshot) overlays(zones func(*karpxv1.EC2NodeClass) []string) (*nodeoverlay.Evaluation, []NodeOverlayResult, string) {
	if len(s.NodeOverlays) == 0 {
		return nil, nil, ""
	}
	var pools []nodeoverlay.Pool
	for i := range s.NodePools {
		np := &s.NodePools[i]
		if !modelled(np) {
			continue
		}
		if in, reason := s.nodePoolInput(np, zones, nil); reason == "" {
			pools = append(pools, nodeoverlay.Pool{NodePool: np, InstanceTypes: in.InstanceTypes})
		}
	}
	ev := nodeoverlay.Evaluate(context.Background(), s.NodeOverlays, pools)
	evaluated := false
	var out []NodeOverlayResult
	for i := range s.NodeOverlays {
		o := &s.NodeOverlays[i]
		r := NodeOverlayResult{Name: o.Name}
		if o.Spec.Weight != nil {
			r.Weight = *o.Spec.Weight
		}
		v := ev.Verdicts[o.Name]
		r.Reason, r.Message, r.Applied = v.Reason, v.Message, v.Reason == ""
		for _, c := range o.Status.Conditions {
			if c.Type == v1alpha1.ConditionTypeValidationSucceeded {
				evaluated = true
				r.Condition = string(c.Status)
				if c.Status != metav1.ConditionTrue {
					r.Condition += ": " + c.Reason
				}
			}
		}
		out = append(out, r)
	}
	slices.SortStableFunc(out, func(a, b NodeOverlayResult) int {
		if a.Weight != b.Weight {
			return int(b.Weight) - int(a.Weight)
		}
		return strings.Compare(b.Name, a.Name)
	})
	if !evaluated {
		for i := range out {
			out[i].Applied = false
		}
		return nil, out, NodeOverlayNote
	}
	return ev, out, ""
}

// Explain runs the scheduling code on s: each NodePool alone, then all of
// them together for Chosen. It does not modify s.
func Explain(s *Snapshot) *Explanation {
	pod := s.Pod
	ex := &Explanation{
		Pod:              pod.Namespace + "/" + pod.Name,
		Pending:          pod.Spec.NodeName == "",
		NodeName:         pod.Spec.NodeName,
		Notes:            append([]string{CatalogNote}, s.Notes...),
		AutoscalerEvents: autoscalerEvents(pod, s.Events),
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			ex.Scheduler = strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "DaemonSet" {
		ex.Notes = append(ex.Notes, "the pod belongs to a DaemonSet: the DaemonSet controller places it on each node, NodePools do not launch nodes for it")
	}
	// Solve keys results by UID; a pod read from a file may have none.
	target := pod.DeepCopy()
	target.Spec.NodeName = ""
	key := target.UID
	if key == "" {
		key = types.UID(target.Namespace + "/" + target.Name)
	}

	zones, zoneNote := s.zones()
	if zoneNote != "" {
		ex.Notes = append(ex.Notes, zoneNote)
	}
	ev, overlays, overlayNote := s.overlays(zones)
	ex.NodeOverlays = overlays
	if overlayNote != "" {
		ex.Notes = append(ex.Notes, overlayNote)
	}
	var inputs []scheduling.NodePoolInput
	for i := range s.NodePools {
		np := &s.NodePools[i]
		r, in, ok := s.explainNodePool(np, target, key, zones, ev)
		if r.NotModelled {
			ex.NotModelled = append(ex.NotModelled, np.Name)
		}
		if ok {
			inputs = append(inputs, in)
		}
		ex.NodePools = append(ex.NodePools, r)
	}
	if len(inputs) > 0 {
		res := scheduling.Solve(scheduling.Input{Pods: []*corev1.Pod{target}, NodePools: inputs, DaemonSetPods: s.DaemonSetPods})
		if len(res.NewNodeClaims) == 1 {
			ex.Chosen = res.NewNodeClaims[0].NodePool.Name
		}
	}
	if len(s.NodePools) == 0 {
		ex.Notes = append(ex.Notes, "the cluster has no NodePool: nothing can launch a node")
	}
	ex.Reservations = s.usedReservations()
	for _, r := range ex.Reservations {
		if !r.Known {
			ex.Notes = append(ex.Notes, ReservationsNote)
			break
		}
	}
	slices.SortStableFunc(ex.NodePools, func(a, b NodePoolResult) int {
		if a.Weight != b.Weight {
			return int(b.Weight) - int(a.Weight)
		}
		return strings.Compare(a.NodePool, b.NodePool)
	})
	return ex
}

// explainNodePool runs the scheduling code on target (Solve's result key
// key) with np alone. ok is false when np cannot be modelled or cannot
// launch at all (r.Reason says why); otherwise in is np's scheduling input.
func (s *Snapshot) explainNodePool(np *karpv1.NodePool, target *corev1.Pod, key types.UID, zones func(*karpxv1.EC2NodeClass) []string, ev *nodeoverlay.Evaluation) (r NodePoolResult, in scheduling.NodePoolInput, ok bool) {
	r = NodePoolResult{NodePool: np.Name}
	if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
		r.NodeClass = ref.Name
	}
	if np.Spec.Weight != nil {
		r.Weight = *np.Spec.Weight
	}
	if !modelled(np) {
		ref := np.Spec.Template.Spec.NodeClassRef
		r.NotModelled = true
		r.Reason = fmt.Sprintf("nodeClassRef %s/%s %s is not a karpenter.k8s.aws EC2NodeClass, which karpx cannot model: the autoscaler's own events for the pod say what it decided", ref.Group, ref.Kind, ref.Name)
		return r, in, false
	}
	in, reason := s.nodePoolInput(np, zones, ev)
	if reason != "" {
		r.Reason = reason
		return r, in, false
	}
	res := scheduling.Solve(scheduling.Input{Pods: []*corev1.Pod{target}, NodePools: []scheduling.NodePoolInput{in}, DaemonSetPods: s.DaemonSetPods})
	if err, unschedulable := res.Unschedulable[key]; unschedulable {
		r.Reason = err.Error()
	} else if len(res.NewNodeClaims) == 1 {
		r.CanLaunch = true
		fillOffering(&r, res.NewNodeClaims[0])
	} else {
		r.Reason = "the scheduling code placed the pod nowhere (no plan, no reason)"
	}
	return r, in, true
}

// fillOffering records plan's cheapest type and offering in r.
func fillOffering(r *NodePoolResult, plan scheduling.NodeClaimPlan) {
	for _, it := range plan.InstanceTypes {
		r.InstanceTypes = append(r.InstanceTypes, it.Name)
	}
	if len(plan.InstanceTypes) == 0 {
		return
	}
	it := plan.InstanceTypes[0]
	r.InstanceType, r.PriceUSDPerHour = it.Name, plan.PriceUSDPerHour
	if o, ok := it.CheapestOffering(plan.AllowsOffering()); ok {
		r.Zone, r.CapacityType = o.Zone, o.CapacityType
		if o.PriceOverlay != "" {
			r.PriceOverlay = o.PriceOverlay
			if c, found := catalog.Get(it.Name); found && c.OnDemandPriceUSDPerHour != nil {
				r.CatalogPriceUSDPerHour = *c.OnDemandPriceUSDPerHour
			}
		}
	}
	r.CapacityOverlays = it.CapacityOverlays
}

// nodePoolInput returns np with its instance types and remaining limits
// (clusterstate.Remaining, the scheduler's own), or why it cannot launch at all (its EC2NodeClass).
// The instance types are the catalogue's after the NodeOverlays of ev
// (nil: none).
func (s *Snapshot) nodePoolInput(np *karpv1.NodePool, zones func(class *karpxv1.EC2NodeClass) []string, ev *nodeoverlay.Evaluation) (scheduling.NodePoolInput, string) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return scheduling.NodePoolInput{}, "spec.template.spec.nodeClassRef is not set"
	}
	i := slices.IndexFunc(s.EC2NodeClasses, func(c karpxv1.EC2NodeClass) bool { return c.Name == ref.Name })
	if i < 0 {
		return scheduling.NodePoolInput{}, fmt.Sprintf("EC2NodeClass %q not found: create it or fix spec.template.spec.nodeClassRef.name", ref.Name)
	}
	class := &s.EC2NodeClasses[i]
	if !class.DeletionTimestamp.IsZero() {
		return scheduling.NodePoolInput{}, fmt.Sprintf("EC2NodeClass %q is being deleted", class.Name)
	}
	if c := findCondition(class.Status.Conditions, "Ready"); c != nil && c.Status != metav1.ConditionTrue {
		return scheduling.NodePoolInput{}, fmt.Sprintf("EC2NodeClass %q is not Ready (%s: %s)", class.Name, c.Reason, c.Message)
	}
	types := withReservations(catalogTypes(zones(class)), s.reservations(class))
	if ev != nil {
		types = ev.Apply(np, types)
	}
	return scheduling.NodePoolInput{NodePool: np, InstanceTypes: types, Remaining: clusterstate.Remaining(np, s.NodeClaims)}, ""
}

// modelled reports whether karpx can model np's node class: a
// karpenter.k8s.aws EC2NodeClass, or no nodeClassRef at all (which
// nodePoolInput reports as the reason).
func modelled(np *karpv1.NodePool) bool {
	ref := np.Spec.Template.Spec.NodeClassRef
	return ref == nil || (ref.Kind == "EC2NodeClass" && ref.Group == karpxv1.SchemeGroupVersion.Group)
}

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// zones returns the zones offerings are built in for a class: its
// status.subnets' zones, else the zones of the cluster's nodes, else one
// placeholder zone, with a note when it had to fall back.
func (s *Snapshot) zones() (func(*karpxv1.EC2NodeClass) []string, string) {
	var nodeZones []string
	for _, n := range s.Nodes {
		if z := n.Labels[corev1.LabelTopologyZone]; z != "" && !slices.Contains(nodeZones, z) {
			nodeZones = append(nodeZones, z)
		}
	}
	slices.Sort(nodeZones)
	fallback := false
	for _, c := range s.EC2NodeClasses {
		if len(c.Status.Subnets) == 0 {
			fallback = true
		}
	}
	note := ""
	if fallback {
		if len(nodeZones) > 0 {
			note = "an EC2NodeClass has no status.subnets (no controller resolved them): zones are the cluster nodes' " + strings.Join(nodeZones, ", ")
		} else {
			note = "an EC2NodeClass has no status.subnets and no node has a zone label: zones are unknown and zone requirements are not checked"
		}
	}
	return func(c *karpxv1.EC2NodeClass) []string {
		var zs []string
		for _, sn := range c.Status.Subnets {
			if !slices.Contains(zs, sn.Zone) {
				zs = append(zs, sn.Zone)
			}
		}
		if len(zs) == 0 {
			zs = nodeZones
		}
		return zs
	}, note
}

// catalogTypes returns the catalogue's instance types that have an
// on-demand price, each offered on-demand and spot (at the on-demand price)
// in every zone. With no zones known they are offered in one zone named "":
// a NodePool or pod requiring particular zones then rules every type out,
// and the output's note says the zones are unknown.
func catalogTypes(zones []string) []*cloudprovider.InstanceType {
	if len(zones) == 0 {
		zones = []string{""}
	}
	all := catalog.All()
	types := make([]*cloudprovider.InstanceType, 0, len(all))
	for _, c := range all {
		if c.OnDemandPriceUSDPerHour == nil {
			continue
		}
		it := &cloudprovider.InstanceType{Name: c.Name, Labels: c.Labels, Capacity: c.Capacity(), Allocatable: c.Allocatable}
		for _, z := range zones {
			it.Offerings = append(it.Offerings,
				cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeOnDemand, PriceUSDPerHour: *c.OnDemandPriceUSDPerHour, Available: true},
				cloudprovider.Offering{Zone: z, CapacityType: karpv1.CapacityTypeSpot, PriceUSDPerHour: *c.OnDemandPriceUSDPerHour, Available: true})
		}
		types = append(types, it)
	}
	return types
}
