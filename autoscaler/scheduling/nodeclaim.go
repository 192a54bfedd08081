package scheduling

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/karpenter/pkg/apis"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/apis/v1alpha1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/requirements"
)

// apiVersion is the API version of NodePool and NodeClaim.
const apiVersion = apis.Group + "/v1"

// NodeClaim returns the karpenter.sh/v1 NodeClaim to create for the plan,
// as Karpenter builds it from a NodePool (sigs.k8s.io/karpenter v1.13.0
// NodeClaimTemplate.ToNodeClaim):
//
//   - metadata.generateName "<nodepool>-";
//   - labels: the template labels, karpenter.sh/nodepool=<nodepool>, the
//     node class label (e.g. karpenter.k8s.aws/ec2nodeclass=<name>) and,
//     for every custom label key (outside the kubernetes.io, k8s.io,
//     karpenter.sh and k8s.aws domains) with an In requirement, its first
//     value;
//   - annotations: the template annotations plus karpenter.sh/nodepool-hash
//     and karpenter.sh/nodepool-hash-version, which drift detection compares,
//     and karpenter.sh/nodeclaim-min-values-relaxed: "true" when
//     MinValuesRelaxed, "false" otherwise. Karpenter's scheduler writes it
//     on every NodeClaim it plans, with or without minValues in the
//     NodePool (Scheduler.addToNewNodeClaim), so provisioned and
//     consolidation replacement NodeClaims both carry it, and it overrides
//     a value the template's annotations set; and
//     karpenter.sh/price-overlay-applied or
//     karpenter.sh/capacity-overlay-applied: "true" when a candidate
//     instance type has an offering a NodeOverlay priced or capacity a
//     NodeOverlay added; ReservationsAnnotationKey with Reservations,
//     when it holds any;
//   - an owner reference to the NodePool, so deleting it deletes the
//     NodeClaim;
//   - the karpenter.sh/termination finalizer, which Karpenter's NodeClaim
//     lifecycle controller adds in a patch after the creation (and karpx's
//     still adds to NodeClaims created elsewhere): written at creation, it
//     saves one API request per NodeClaim and leaves no moment when a
//     NodeClaim could go without its instance being terminated;
//   - spec: Requirements, Requests (as resources.requests), and the
//     template's taints, startupTaints, nodeClassRef, expireAfter and
//     terminationGracePeriod.
//
// The result shares nothing with the plan or the NodePool.
func (p NodeClaimPlan) NodeClaim() *karpv1.NodeClaim {
	np := p.NodePool.DeepCopy()
	tmpl := np.Spec.Template

	labels := map[string]string{}
	for _, r := range p.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) > 0 && isCustomLabel(r.Key) {
			if _, set := labels[r.Key]; !set {
				labels[r.Key] = r.Values[0]
			}
		}
	}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	labels[karpv1.NodePoolLabelKey] = np.Name
	if ref := tmpl.Spec.NodeClassRef; ref != nil {
		labels[karpv1.NodeClassLabelKey(ref.GroupKind())] = ref.Name
	}

	annotations := map[string]string{}
	for k, v := range tmpl.Annotations {
		annotations[k] = v
	}
	annotations[karpv1.NodePoolHashAnnotationKey] = np.Hash()
	annotations[karpv1.NodePoolHashVersionAnnotationKey] = karpv1.NodePoolHashVersion
	annotations[karpv1.NodeClaimMinValuesRelaxedAnnotationKey] = strconv.FormatBool(p.MinValuesRelaxed)
	if len(p.Reservations) > 0 {
		annotations[ReservationsAnnotationKey] = strings.Join(p.Reservations, ",")
	}
	// NodeOverlays (Karpenter's NodeClaimTemplate.ToNodeClaim@v1.14.0):
	// the cloud provider launches such a NodeClaim by the overlaid prices.
	for _, it := range p.InstanceTypes {
		for _, o := range it.Offerings {
			if o.PriceOverlay != "" {
				annotations[v1alpha1.PriceOverlayAppliedAnnotationKey] = "true"
			}
		}
		if len(it.CapacityOverlays) > 0 {
			annotations[v1alpha1.CapacityOverlayAppliedAnnotationKey] = "true"
		}
	}

	requirements := make([]karpv1.NodeSelectorRequirementWithMinValues, len(p.Requirements))
	for i := range p.Requirements {
		p.Requirements[i].DeepCopyInto(&requirements[i])
	}

	return &karpv1.NodeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: np.Name + "-",
			Labels:       labels,
			Annotations:  annotations,
			Finalizers:   []string{karpv1.TerminationFinalizer},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         apiVersion,
				Kind:               "NodePool",
				Name:               np.Name,
				UID:                np.UID,
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: karpv1.NodeClaimSpec{
			Taints:                 tmpl.Spec.Taints,
			StartupTaints:          tmpl.Spec.StartupTaints,
			Requirements:           requirements,
			Resources:              karpv1.ResourceRequirements{Requests: p.Requests.DeepCopy()},
			NodeClassRef:           tmpl.Spec.NodeClassRef,
			TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod,
			ExpireAfter:            tmpl.Spec.ExpireAfter,
		},
	}
}

// isCustomLabel reports whether key is a user label rather than one
// Kubernetes, Karpenter or the AWS provider sets from the instance type.
func isCustomLabel(key string) bool {
	domain := karpv1.GetLabelDomain(key)
	for _, reserved := range []string{"kubernetes.io", "k8s.io", "karpenter.sh", "k8s.aws"} {
		if domain == reserved || strings.HasSuffix(domain, "."+reserved) {
			return false
		}
	}
	return true
}

// AllowsOffering returns a filter for cloudprovider.InstanceType's
// CheapestOffering: whether the plan's Requirements admit an offering's zone
// and capacity type (package requirements' AllowsOffering). Requirements
// are parsed once, when AllowsOffering is called.
func (p NodeClaimPlan) AllowsOffering() func(cloudprovider.Offering) bool {
	reqs := requirements.ParseNodeClaim(p.Requirements)
	return func(o cloudprovider.Offering) bool { return reqs.AllowsOffering(o.Zone, o.CapacityType) }
}
