package scheduling

import (
	"errors"
	"fmt"
	"strings"

	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
)

// podFit is the filter result (pipeline step 2) for one pod signature and
// one NodePool: the pod's terms the NodePool can satisfy, or why none.
type podFit struct {
	terms []*termFit
	err   error
	// rank orders err among the NodePools' reasons for an unschedulable
	// pod (see reasonRank).
	rank reasonRank
}

// reasonRank orders why NodePools cannot take a pod, most useful first.
type reasonRank int

const (
	// rankPoolCause: the pod tolerates the NodePool's taints and
	// satisfies its requirements; the NodePool's own state stops it
	// (EC2NodeClass not ready, limits reached, no instance type fits).
	rankPoolCause reasonRank = iota
	// rankPoolUnusable: the NodePool takes no pending pod at all (static,
	// being deleted, contradictory requirements, no instance types).
	rankPoolUnusable
	// rankIncompatible: the pod does not tolerate a taint or conflicts
	// with the NodePool's requirements; another NodePool is meant for it.
	rankIncompatible
)

// incompatibleError is a pod that no node of a NodePool could run, because
// of the NodePool's taints or requirements.
type incompatibleError struct{ error }

func (e incompatibleError) Unwrap() error { return e.error }

// termFit is one pod term the NodePool can satisfy.
type termFit struct {
	// exprs are the term's expressions (for the NodeClaim requirements).
	exprs []requirement
	// abstract are the expressions on keys instance types do not carry;
	// a plan intersects them with its other pods' so they stay satisfiable.
	abstract []requirement
	// masks[i] are the offerings of pool.types[i] the term accepts.
	masks []uint64
}

// fit filters the NodePool's candidates for a pod (step 2), cached by the
// pod's signature.
func (p *pool) fit(pi *podInfo) *podFit {
	if f, ok := p.fits[pi.signature]; ok {
		return f
	}
	f := p.computeFit(pi)
	p.fits[pi.signature] = f
	return f
}

func (p *pool) computeFit(pi *podInfo) *podFit {
	if p.err != nil {
		return &podFit{err: p.err, rank: rankPoolUnusable}
	}
	if t, blocked := blockingTaint(p.taints, pi.pod.Spec.Tolerations); blocked {
		return &podFit{rank: rankIncompatible, err: fmt.Errorf("incompatible with NodePool %q: taint %s not tolerated (add a toleration to the pod or use another NodePool)", p.name, describeTaint(t))}
	}
	if pi.termsErr != nil {
		return &podFit{rank: rankIncompatible, err: fmt.Errorf("incompatible with NodePool %q: %w", p.name, pi.termsErr)}
	}
	f := &podFit{}
	var errs []string
	allIncompatible := true
	for _, term := range pi.terms {
		var (
			tf  *termFit
			err error
		)
		if p.unavailable != "" {
			err = p.fitWithoutTypes(term)
		} else {
			tf, err = p.fitTerm(term)
		}
		if err != nil {
			errs = append(errs, err.Error())
			allIncompatible = allIncompatible && errors.As(err, new(incompatibleError))
			continue
		}
		if p.unavailable != "" {
			// The pod could run on this NodePool's nodes: its state is the cause.
			return &podFit{rank: rankPoolCause, err: fmt.Errorf("NodePool %q cannot launch nodes: %s", p.name, p.unavailable)}
		}
		f.terms = append(f.terms, tf)
	}
	if len(f.terms) == 0 && allIncompatible {
		f.rank = rankIncompatible
	}
	switch {
	case len(f.terms) > 0:
	case len(errs) == 1:
		f.err = fmt.Errorf("%s", errs[0])
	default:
		for i := range errs {
			errs[i] = fmt.Sprintf("term %d: %s", i+1, errs[i])
		}
		f.err = fmt.Errorf("none of the pod's %d node affinity terms fits NodePool %q: %s", len(errs), p.name, strings.Join(errs, "; "))
	}
	return f
}

// fitTerm checks one pod term against the NodePool: expressions on custom
// labels against the NodePool's requirements and labels, expressions on
// instance type and offering labels against every candidate offering.
func (p *pool) fitTerm(term podTerm) (*termFit, error) {
	tf, concrete, err := p.fitAbstract(term)
	if err != nil {
		return nil, err
	}
	tf.masks = make([]uint64, len(p.types))
	found := false
	for i, it := range p.types {
		tf.masks[i] = allowedOfferings(it, concrete, p.offerings[i])
		found = found || tf.masks[i] != 0
	}
	if !found {
		return nil, p.explainNoMatch(concrete)
	}
	return tf, nil
}

// fitAbstract checks one pod term against the NodePool's requirements and
// labels, without instance types: the term's expressions on instance type
// and offering labels are returned as concrete. Errors are
// incompatibleError.
func (p *pool) fitAbstract(term podTerm) (*termFit, []requirement, error) {
	tf := &termFit{exprs: term.exprs}
	var concrete []requirement
	for _, e := range term.exprs {
		if p.typeKeys[e.Key] {
			concrete = append(concrete, e)
			continue
		}
		pr, defined := p.requirements[e.Key]
		if defined && pr.Intersect(e).Empty() {
			return nil, nil, incompatibleError{fmt.Errorf("incompatible with NodePool %q: %s conflicts with %s", p.name, e.Origin, pr.Origin)}
		}
		if !defined && !e.AllowAbsent && !karpv1.WellKnownLabels.Has(e.Key) {
			return nil, nil, incompatibleError{fmt.Errorf("incompatible with NodePool %q: %s needs label %s, which the NodePool neither sets in spec.template.metadata.labels nor allows in spec.template.spec.requirements", p.name, e.Origin, e.Key)}
		}
		tf.abstract = append(tf.abstract, e)
	}
	if _, err := intersectAll(p.abstract, tf.abstract); err != nil {
		return nil, nil, incompatibleError{fmt.Errorf("incompatible with NodePool %q: %w", p.name, err)}
	}
	return tf, concrete, nil
}

// fitWithoutTypes is fitAbstract for a NodePool without instance types
// (unavailable): expressions on instance type and offering labels are
// checked against the NodePool's requirements on the same keys.
func (p *pool) fitWithoutTypes(term podTerm) error {
	_, concrete, err := p.fitAbstract(term)
	if err != nil {
		return err
	}
	for _, e := range concrete {
		if pr, defined := p.requirements[e.Key]; defined && pr.Intersect(e).Empty() {
			return incompatibleError{fmt.Errorf("incompatible with NodePool %q: %s conflicts with %s", p.name, e.Origin, pr.Origin)}
		}
	}
	return nil
}

// explainNoMatch names the pod expression no candidate satisfies, with the
// NodePool requirement on the same key when there is one.
func (p *pool) explainNoMatch(concrete []requirement) error {
	for _, e := range concrete {
		ok := false
		for i, it := range p.types {
			if allowedOfferings(it, []requirement{e}, p.offerings[i]) != 0 {
				ok = true
				break
			}
		}
		if ok {
			continue
		}
		what := "instance type"
		if isOfferingKey(e.Key) {
			what = "available offering"
		}
		hint := ""
		if pr, ok := p.requirements[e.Key]; ok {
			hint = fmt.Sprintf(" (the NodePool allows %s)", strings.TrimPrefix(pr.Origin, "NodePool requirement "))
		}
		return fmt.Errorf("no %s in NodePool %q satisfies %s%s", what, p.name, e.Origin, hint)
	}
	origins := make([]string, len(concrete))
	for i, e := range concrete {
		origins[i] = e.Origin
	}
	return fmt.Errorf("no instance type in NodePool %q satisfies %s together", p.name, strings.Join(origins, ", "))
}

// addDaemonSetOverhead adds, per instance type, the requests of every
// DaemonSet pod that would run on a new node of that type: it tolerates the
// template taints and one of its terms accepts some available offering of
// the type. A DaemonSet whose own node affinity excludes a type (e.g.
// arm64 only) does not count against that type.
func (p *pool) addDaemonSetOverhead(daemonSets []*podInfo) {
	if p.err != nil {
		return
	}
	for _, ds := range daemonSets {
		f := p.computeFit(ds)
		if f.err != nil {
			continue
		}
		for i := range p.types {
			runs := false
			for _, tf := range f.terms {
				runs = runs || tf.masks[i] != 0
			}
			if runs {
				p.overhead[i] = p.overhead[i].plus(ds.vec)
				p.overheadList[i] = addResourceLists(p.overheadList[i], ds.requests)
				p.avail[i] = p.avail[i].minus(ds.vec)
			}
		}
	}
}
