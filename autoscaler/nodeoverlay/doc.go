// Package nodeoverlay evaluates Karpenter's karpenter.sh/v1alpha1
// NodeOverlays and applies them to the instance types karpx schedules and
// consolidates with, as Karpenter v1.14 does behind its NodeOverlay
// feature gate (sigs.k8s.io/karpenter v1.14.0, designs/node-overlay.md,
// pkg/controllers/nodeoverlay and pkg/cloudprovider/overlay).
//
// A NodeOverlay selects offerings with spec.requirements (matched against
// the NodePool's name and template labels, the instance type's labels and,
// per offering, its zone and capacity type) and either replaces their
// price (spec.price, USD per hour) or adjusts it (spec.priceAdjustment,
// "+0.5", "-0.1", "+10%" or "-20%", floored at zero), and may add extended
// resources to the instance type's capacity (spec.capacity).
//
// Evaluate orders overlays by spec.weight, highest first (equal weights by
// name, reverse lexical, as NodeOverlayList.OrderByWeight), and keeps,
// per offering and per resource, the first overlay's value. An overlay
// that fails Karpenter's runtime validation, or that would set a price on
// an offering, or a resource on an instance type, that an overlay of the
// same weight already set, is left out entirely; Controller reports it in
// the ValidationSucceeded condition with reason RuntimeValidation or
// Conflict. Store holds the last evaluation and Apply applies it to fresh
// instance types, so availability and new offerings are never stale.
package nodeoverlay
