package lint

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	apisv1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/catalog"
	"github.com/karpx/karpx/requirements"
)

// NodeClassLookup reports whether the EC2NodeClass named name exists. An
// error means "unknown" and suppresses KX101 (a lookup failure must never
// turn into a false warning). The webhook passes a cache-backed lookup; the
// linter passes one over the files it reads.
type NodeClassLookup func(ctx context.Context, name string) (bool, error)

// CheckNodePool runs the NodePool rules (KX101–KX106) on np. lookup may be
// nil, which skips KX101. A nil np has no findings.
func CheckNodePool(ctx context.Context, np *karpv1.NodePool, lookup NodeClassLookup) Findings {
	if np == nil {
		return nil
	}
	var out Findings
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref != nil {
		group := ref.Group
		if g, _, versioned := strings.Cut(ref.Group, "/"); versioned {
			group = g
			out = append(out, Finding{
				RuleID: RuleNodeClassRefGroup, Severity: severityOf(RuleNodeClassRefGroup),
				Field:   "spec.template.spec.nodeClassRef.group",
				Message: fmt.Sprintf("%q carries a version; the NodePool CRD requires a bare API group", ref.Group),
				Fix:     fmt.Sprintf("set group: %s", g),
			})
		}
		if lookup != nil && group == apisv1.Group && ref.Kind == "EC2NodeClass" && ref.Name != "" {
			if exists, err := lookup(ctx, ref.Name); err == nil && !exists {
				out = append(out, Finding{
					RuleID: RuleNodeClassMissing, Severity: severityOf(RuleNodeClassMissing),
					Field:   "spec.template.spec.nodeClassRef.name",
					Message: fmt.Sprintf("EC2NodeClass %q does not exist (yet); no node is launched until it does", ref.Name),
					Fix:     "create the EC2NodeClass or correct the name",
				})
			}
		}
	}
	out = append(out, checkRequirements(np.Spec.Template.Spec.Requirements)...)
	names := make([]string, 0, len(np.Spec.Limits))
	for name := range np.Spec.Limits {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		if q := np.Spec.Limits[corev1.ResourceName(name)]; q.Sign() < 0 {
			out = append(out, Finding{
				RuleID: RuleNegativeLimit, Severity: severityOf(RuleNegativeLimit),
				Field:   "spec.limits." + name,
				Message: fmt.Sprintf("is %s; a negative limit is exceeded from the start, so the NodePool never launches a node", q.String()),
				Fix:     "set a positive limit (for example cpu: \"1000\") or remove it for no limit",
			})
		}
	}
	for i, b := range np.Spec.Disruption.Budgets {
		if b.Schedule == nil {
			continue
		}
		if err := ParseBudgetSchedule(*b.Schedule); err != nil {
			out = append(out, Finding{
				RuleID: RuleBudgetSchedule, Severity: severityOf(RuleBudgetSchedule),
				Field:   fmt.Sprintf("spec.disruption.budgets[%d].schedule", i),
				Message: fmt.Sprintf("%q does not parse as cron: %v; Karpenter would block every disruption of this NodePool", *b.Schedule, err),
				Fix:     "use five fields (minute hour day-of-month month day-of-week), e.g. \"0 9 * * mon-fri\", or a macro such as @daily; times are UTC",
			})
		}
	}
	for i := range out {
		out[i].Kind, out[i].Name = "NodePool", np.Name
	}
	return out
}

// ParseBudgetSchedule parses a disruption budget schedule exactly as
// Karpenter does (sigs.k8s.io/karpenter pkg/apis/v1 Budget.IsActive:
// cron.ParseStandard of "TZ=UTC " + schedule). It returns the parser's error.
func ParseBudgetSchedule(schedule string) error {
	if strings.Contains(schedule, "TZ=") {
		return fmt.Errorf("time zones are not supported; schedules are UTC")
	}
	_, err := cron.ParseStandard("TZ=UTC " + schedule)
	return err
}

// catalogIndex is the catalogue prepared for requirement checks.
type catalogIndex struct {
	types []catalog.InstanceType
	// keys holds every label key carried by at least one type.
	keys map[string]bool
}

var (
	catalogOnce sync.Once
	catalogIdx  catalogIndex
)

func instanceCatalog() *catalogIndex {
	catalogOnce.Do(func() {
		catalogIdx.types = catalog.All()
		catalogIdx.keys = map[string]bool{}
		for _, it := range catalogIdx.types {
			for k := range it.Labels {
				catalogIdx.keys[k] = true
			}
		}
		// The catalogue records every type as linux; whether a node runs
		// linux or windows depends on the AMI family, not the type.
		delete(catalogIdx.keys, corev1.LabelOSStable)
	})
	return &catalogIdx
}

// checkRequirements reports KX102 and KX103. Requirements on keys the
// catalogue does not describe (capacity type, zone, custom labels,
// kubernetes.io/os) constrain offerings or the AMI, not instance types, and
// are ignored, as are unknown operators (the CRD rejects them). Matching is
// package requirements': Gt, Lt, Gte and Lte need an integer label and an
// integer value, and a requirement that does not parse admits nothing.
func checkRequirements(reqs []karpv1.NodeSelectorRequirementWithMinValues) Findings {
	idx := instanceCatalog()
	parsed := requirements.ParseNodeClaim(reqs)
	var relevant []int
	for i, r := range reqs {
		if idx.keys[r.Key] && requirements.KnownOperator(r.Operator) {
			relevant = append(relevant, i)
		}
	}
	if len(relevant) == 0 {
		return nil
	}
	// Apply requirements one by one, so the message can name the one that
	// empties the set.
	matching := idx.types
	for _, i := range relevant {
		next := slices.DeleteFunc(slices.Clone(matching), func(it catalog.InstanceType) bool {
			return !parsed[i : i+1].MatchLabels(it.Labels)
		})
		if len(next) == 0 {
			return Findings{unsatisfiable(reqs[i], i, len(matching), len(idx.types))}
		}
		matching = next
	}
	var out Findings
	for _, i := range relevant {
		if f, ok := minValuesShort(reqs[i], i, matching); ok {
			out = append(out, f)
		}
	}
	return out
}

// unsatisfiable is the KX102 finding for requirement r (index i), which
// leaves none of the left instance types (of all in the catalogue).
func unsatisfiable(r karpv1.NodeSelectorRequirementWithMinValues, i, left, all int) Finding {
	msg := fmt.Sprintf("%s leaves no instance type in the catalogue (%d types)", describeRequirement(r), all)
	if left < all {
		msg = fmt.Sprintf("%s leaves none of the %d instance types the earlier requirements allow", describeRequirement(r), left)
	}
	return Finding{
		RuleID: RuleRequirementsUnsatisfiable, Severity: severityOf(RuleRequirementsUnsatisfiable),
		Field:   fmt.Sprintf("spec.template.spec.requirements[%d]", i),
		Message: msg,
		Fix:     "widen the values or drop the requirement (values must match Karpenter's well-known instance labels)",
	}
}

// minValuesShort is the KX103 finding for requirement r (index i) when the
// matching types carry fewer distinct values of r.Key than r.MinValues.
func minValuesShort(r karpv1.NodeSelectorRequirementWithMinValues, i int, matching []catalog.InstanceType) (Finding, bool) {
	if r.MinValues == nil {
		return Finding{}, false
	}
	distinct := map[string]bool{}
	for _, it := range matching {
		if v, ok := it.Labels[r.Key]; ok {
			distinct[v] = true
		}
	}
	if len(distinct) >= *r.MinValues {
		return Finding{}, false
	}
	return Finding{
		RuleID: RuleMinValuesUnsatisfiable, Severity: severityOf(RuleMinValuesUnsatisfiable),
		Field:   fmt.Sprintf("spec.template.spec.requirements[%d].minValues", i),
		Message: fmt.Sprintf("minValues %d for %s, but the requirements allow only %d distinct values in the catalogue", *r.MinValues, r.Key, len(distinct)),
		Fix:     fmt.Sprintf("lower minValues to at most %d or widen the requirements", len(distinct)),
	}, true
}

// describeRequirement renders r as the user wrote it, at most 80
// characters.
func describeRequirement(r karpv1.NodeSelectorRequirementWithMinValues) string {
	return truncate(requirements.DescribeExpression(r.Key, r.Operator, r.Values), 80)
}
