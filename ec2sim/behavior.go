package ec2sim

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Behavior scripts how the emulated kubelet of one instance behaves. It is
// read from marker lines in the launch template's user data,
//
//	# karpx-sim: never-join
//	# karpx-sim: boot-delay=30s not-ready=20s
//
// and from the instance tag karpx.sim/behavior (same syntax, space
// separated, e.g. "boot-delay=30s late-taint=example.com/init:NoSchedule@10s");
// the tag is applied after the user data. Tokens:
//
//	never-join                        the instance runs but no Node ever appears
//	boot-delay=<duration>             running → Node created (overrides Config.BootDelay)
//	not-ready=<duration>              the Node stays NotReady this long after it is created
//	late-taint=<key>[=<value>]:<effect>@<duration>
//	                                  the Node registers with this taint, removed <duration> after creation
//	allocatable=<resource>:<quantity> adds the signed quantity to status.allocatable (e.g. memory:-512Mi)
//	not-ready-window=<at>+<length>    the Node goes NotReady <at> after creation for <length>
//	                                  (a kubelet restart; repeatable)
//	late-resource=<resource>@<duration>
//	                                  the catalogue's <resource> (e.g. nvidia.com/gpu) is missing from
//	                                  status.capacity and status.allocatable until <duration> after
//	                                  creation (a device plugin registering late; repeatable)
type Behavior struct {
	// NeverJoin keeps the instance from ever creating a Node.
	NeverJoin bool
	// BootDelay, when set, replaces Config.BootDelay for this instance.
	BootDelay *time.Duration
	// NotReadyFor is how long the Node stays NotReady after it is created.
	NotReadyFor time.Duration
	// LateTaints are registered with the Node and removed After their delay.
	LateTaints []LateTaint
	// AllocatableOffset is added to the catalogue's allocatable (negative
	// quantities reduce it; results are floored at zero).
	AllocatableOffset corev1.ResourceList
	// NotReadyWindows are periods after Node creation during which the
	// Node reports NotReady (kubelet restarting).
	NotReadyWindows []NotReadyWindow
	// LateResources are extended resources advertised only some time after
	// Node creation.
	LateResources []LateResource
}

// NotReadyWindow is a period, relative to Node creation, during which the
// Node is NotReady: the emulated kubelet stops posting status (kwok no
// longer manages the Node) and Ready is False with reason KubeletNotReady.
type NotReadyWindow struct {
	// At is the time from Node creation to the start of the window.
	At time.Duration
	// For is the window's length.
	For time.Duration
}

// LateResource is a resource of the instance type (from the catalogue)
// that kubelet advertises only After the Node was created, as a device
// plugin that registers after kubelet does (nvidia.com/gpu).
type LateResource struct {
	// Name is the resource name, e.g. nvidia.com/gpu.
	Name corev1.ResourceName
	// After is the time from Node creation until the resource appears in
	// status.capacity and status.allocatable.
	After time.Duration
}

// LateTaint is a taint the Node registers with and loses after a delay.
type LateTaint struct {
	// Taint is the taint.
	Taint corev1.Taint
	// After is the time from Node creation to the taint's removal.
	After time.Duration
}

// BehaviorTagKey is the instance tag that carries behaviour tokens.
const BehaviorTagKey = "karpx.sim/behavior"

var reMarker = regexp.MustCompile(`(?m)^\s*#\s*karpx-sim:(.*)$`)

// behaviorFromUserData parses every "# karpx-sim:" line of user data.
func behaviorFromUserData(userData string) (Behavior, error) {
	var b Behavior
	for _, m := range reMarker.FindAllStringSubmatch(userData, -1) {
		line, err := ParseBehavior(m[1])
		if err != nil {
			return Behavior{}, err
		}
		b = b.merge(line)
	}
	return b, nil
}

// ParseBehavior parses space-separated behaviour tokens (see Behavior). It
// returns an error naming the first token it does not understand.
func ParseBehavior(s string) (Behavior, error) {
	var b Behavior
	for _, tok := range strings.Fields(s) {
		key, val, hasVal := strings.Cut(tok, "=")
		var err error
		switch {
		case key == "never-join" && !hasVal:
			b.NeverJoin = true
		case key == "boot-delay" && hasVal:
			var d time.Duration
			if d, err = parseNonNegative(val); err == nil {
				b.BootDelay = &d
			}
		case key == "not-ready" && hasVal:
			b.NotReadyFor, err = parseNonNegative(val)
		case key == "late-taint" && hasVal:
			var lt LateTaint
			if lt, err = parseLateTaint(val); err == nil {
				b.LateTaints = append(b.LateTaints, lt)
			}
		case key == "allocatable" && hasVal:
			name, qty, ok := strings.Cut(val, ":")
			var q resource.Quantity
			if q, err = resource.ParseQuantity(qty); err == nil && ok && name != "" {
				if b.AllocatableOffset == nil {
					b.AllocatableOffset = corev1.ResourceList{}
				}
				cur := b.AllocatableOffset[corev1.ResourceName(name)]
				cur.Add(q)
				b.AllocatableOffset[corev1.ResourceName(name)] = cur
			} else if err == nil {
				err = fmt.Errorf("want <resource>:<quantity>")
			}
		case key == "not-ready-window" && hasVal:
			at, length, ok := strings.Cut(val, "+")
			var w NotReadyWindow
			if !ok {
				err = fmt.Errorf("want <at>+<length>, e.g. 150s+20s")
			} else if w.At, err = parseNonNegative(at); err == nil {
				if w.For, err = parseNonNegative(length); err == nil && w.For == 0 {
					err = fmt.Errorf("length must be positive")
				}
			}
			if err == nil {
				b.NotReadyWindows = append(b.NotReadyWindows, w)
			}
		case key == "late-resource" && hasVal:
			name, after, ok := strings.Cut(val, "@")
			var d time.Duration
			if !ok || name == "" {
				err = fmt.Errorf("want <resource>@<duration>, e.g. nvidia.com/gpu@90s")
			} else if d, err = parseNonNegative(after); err == nil {
				b.LateResources = append(b.LateResources, LateResource{Name: corev1.ResourceName(name), After: d})
			}
		default:
			err = fmt.Errorf("unknown token")
		}
		if err != nil {
			return Behavior{}, fmt.Errorf("karpx-sim behavior token %q: %w", tok, err)
		}
	}
	return b, nil
}

func parseNonNegative(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil && d < 0 {
		err = fmt.Errorf("negative duration")
	}
	return d, err
}

func parseLateTaint(s string) (LateTaint, error) {
	spec, after, ok := strings.Cut(s, "@")
	if !ok {
		return LateTaint{}, fmt.Errorf("want <key>[=<value>]:<effect>@<duration>")
	}
	d, err := parseNonNegative(after)
	if err != nil {
		return LateTaint{}, err
	}
	i := strings.LastIndexByte(spec, ':')
	if i <= 0 {
		return LateTaint{}, fmt.Errorf("want <key>[=<value>]:<effect>@<duration>")
	}
	t := corev1.Taint{Effect: corev1.TaintEffect(spec[i+1:])}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return LateTaint{}, fmt.Errorf("effect %q is not NoSchedule, PreferNoSchedule or NoExecute", t.Effect)
	}
	t.Key, t.Value, _ = strings.Cut(spec[:i], "=")
	return LateTaint{Taint: t, After: d}, nil
}

// merge returns b with o applied on top.
func (b Behavior) merge(o Behavior) Behavior {
	b.NeverJoin = b.NeverJoin || o.NeverJoin
	if o.BootDelay != nil {
		b.BootDelay = o.BootDelay
	}
	if o.NotReadyFor > 0 {
		b.NotReadyFor = o.NotReadyFor
	}
	b.LateTaints = append(append([]LateTaint{}, b.LateTaints...), o.LateTaints...)
	b.NotReadyWindows = append(append([]NotReadyWindow{}, b.NotReadyWindows...), o.NotReadyWindows...)
	b.LateResources = append(append([]LateResource{}, b.LateResources...), o.LateResources...)
	if len(o.AllocatableOffset) > 0 {
		sum := corev1.ResourceList{}
		for _, l := range []corev1.ResourceList{b.AllocatableOffset, o.AllocatableOffset} {
			for k, v := range l {
				cur := sum[k]
				cur.Add(v)
				sum[k] = cur
			}
		}
		b.AllocatableOffset = sum
	}
	return b
}

// String renders b in token syntax ("" for the default behaviour).
func (b Behavior) String() string {
	var toks []string
	if b.NeverJoin {
		toks = append(toks, "never-join")
	}
	if b.BootDelay != nil {
		toks = append(toks, "boot-delay="+b.BootDelay.String())
	}
	if b.NotReadyFor > 0 {
		toks = append(toks, "not-ready="+b.NotReadyFor.String())
	}
	for _, lt := range b.LateTaints {
		kv := lt.Taint.Key
		if lt.Taint.Value != "" {
			kv += "=" + lt.Taint.Value
		}
		toks = append(toks, fmt.Sprintf("late-taint=%s:%s@%s", kv, lt.Taint.Effect, lt.After))
	}
	for _, k := range sortedKeys(b.AllocatableOffset) {
		q := b.AllocatableOffset[corev1.ResourceName(k)]
		toks = append(toks, "allocatable="+k+":"+q.String())
	}
	for _, w := range b.NotReadyWindows {
		toks = append(toks, fmt.Sprintf("not-ready-window=%s+%s", w.At, w.For))
	}
	for _, r := range b.LateResources {
		toks = append(toks, fmt.Sprintf("late-resource=%s@%s", r.Name, r.After))
	}
	return strings.Join(toks, " ")
}
