package webhook

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/karpx/karpx/catalog/startuptaints"
)

// TaintRule says which startup taints a node agent puts on (or removes from)
// new nodes, and how to tell that the agent runs in the cluster; declared
// with the built-in rules in catalog/startuptaints.
type TaintRule = startuptaints.Rule

// BuiltinTaintRules returns the built-in rules (Cilium, AWS EBS CSI node,
// AWS EFS CSI node, Istio CNI) as a fresh copy: startuptaints.Builtin.
func BuiltinTaintRules() []TaintRule { return startuptaints.Builtin() }

// TaintRulesConfigKey is the ConfigMap data key holding extra rules, as YAML:
//
//	rules:
//	- name: my-agent
//	  source: https://example.com/docs
//	  daemonSetSelector: app=my-agent
//	  taints:
//	  - {key: example.com/agent-not-ready, effect: NoSchedule}
//	- name: cilium        # override a built-in rule
//	  enabled: true       # force it on even if its DaemonSet is not found
const TaintRulesConfigKey = "rules.yaml"

type taintRulesConfig struct {
	Rules []TaintRule `json:"rules"`
}

// ParseTaintRules parses the TaintRulesConfigKey document strictly and
// validates each rule: a name, a parseable DaemonSetSelector, and taints
// with a qualified key, a valid value and an effect of NoSchedule,
// PreferNoSchedule or NoExecute. A rule without taints is valid only when it
// overrides a built-in (for example to disable it).
func ParseTaintRules(doc string) ([]TaintRule, error) {
	var cfg taintRulesConfig
	if err := yaml.UnmarshalStrict([]byte(doc), &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", TaintRulesConfigKey, err)
	}
	builtin := map[string]bool{}
	for _, r := range startuptaints.Builtin() {
		builtin[r.Name] = true
	}
	for i, r := range cfg.Rules {
		where := fmt.Sprintf("%s: rules[%d]", TaintRulesConfigKey, i)
		if r.Name == "" {
			return nil, fmt.Errorf("%s: name is required", where)
		}
		if _, err := labels.Parse(r.DaemonSetSelector); err != nil {
			return nil, fmt.Errorf("%s (%s): daemonSetSelector: %w", where, r.Name, err)
		}
		if len(r.Taints) == 0 && !builtin[r.Name] {
			return nil, fmt.Errorf("%s (%s): taints are required", where, r.Name)
		}
		for j, t := range r.Taints {
			if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
				return nil, fmt.Errorf("%s (%s): taints[%d].key %q: %s", where, r.Name, j, t.Key, strings.Join(errs, "; "))
			}
			if t.Value != "" {
				if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
					return nil, fmt.Errorf("%s (%s): taints[%d].value %q: %s", where, r.Name, j, t.Value, strings.Join(errs, "; "))
				}
			}
			switch t.Effect {
			case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			default:
				return nil, fmt.Errorf("%s (%s): taints[%d].effect %q: want NoSchedule, PreferNoSchedule or NoExecute", where, r.Name, j, t.Effect)
			}
		}
	}
	return cfg.Rules, nil
}

// MergeTaintRules returns base with overrides applied: an override whose
// name matches a base rule replaces its non-empty fields (taints, selector,
// source, enabled); other overrides are appended. Order is base order, then
// new rules in override order.
func MergeTaintRules(base, overrides []TaintRule) []TaintRule {
	out := make([]TaintRule, 0, len(base)+len(overrides))
	index := map[string]int{}
	for _, r := range base {
		index[r.Name] = len(out)
		out = append(out, r)
	}
	for _, o := range overrides {
		i, ok := index[o.Name]
		if !ok {
			index[o.Name] = len(out)
			out = append(out, o)
			continue
		}
		r := out[i]
		if len(o.Taints) > 0 {
			r.Taints = o.Taints
		}
		if o.DaemonSetSelector != "" {
			r.DaemonSetSelector = o.DaemonSetSelector
		}
		if o.Source != "" {
			r.Source = o.Source
		}
		if o.Enabled != nil {
			r.Enabled = o.Enabled
		}
		out[i] = r
	}
	return out
}

// ActiveTaint is a taint to inject and the rule that asks for it.
type ActiveTaint struct {
	// Rule is the TaintRule name, for logs and metrics.
	Rule string
	// Taint is the taint to add.
	Taint corev1.Taint
}

// TaintProvider returns the startup taints that apply to the cluster now.
type TaintProvider interface {
	ActiveTaints(ctx context.Context) ([]ActiveTaint, error)
}

// DefaultStartupTaintNamespaces are the namespaces whose DaemonSets
// startup-taint detection reads by default: kube-system, where each
// detected built-in agent installs by default (Cilium's Helm chart and
// cilium-cli, the aws-ebs-csi-driver and aws-efs-csi-driver charts and EKS
// add-ons). Operators who install an agent elsewhere name its namespace
// (--startup-taint-namespaces, the chart's webhook.startupTaintNamespaces).
var DefaultStartupTaintNamespaces = []string{"kube-system"}

// namespaces returns Namespaces, or DefaultStartupTaintNamespaces when nil.
func (p *ClusterTaintProvider) namespaces() []string {
	if p.Namespaces == nil {
		return DefaultStartupTaintNamespaces
	}
	return p.Namespaces
}

// ClusterTaintProvider detects node agents from the cluster through a
// (normally cache-backed) client.Reader: it reads the extra rules from the
// ConfigMap ConfigMap (key TaintRulesConfigKey), merges them over the
// built-in rules, and activates every rule that is enabled or whose
// DaemonSetSelector matches a DaemonSet in one of Namespaces. DaemonSets are read as metadata
// only (metav1.PartialObjectMetadata).
type ClusterTaintProvider struct {
	// Reader reads DaemonSets and the ConfigMap.
	Reader client.Reader
	// Namespaces are the only namespaces whose DaemonSets count for
	// detection; nil means DefaultStartupTaintNamespaces. A DaemonSet that
	// a tenant creates in a namespace of its own, labelled like an agent,
	// must not put that agent's NoExecute taint on every NodePool: with no
	// agent to remove it, no new node would ever initialise.
	Namespaces []string
	// ConfigMap names the ConfigMap of extra rules; an empty name or a
	// missing ConfigMap means built-in rules only.
	ConfigMap types.NamespacedName

	// mu guards parsed, the rules of the last ConfigMap version read, so
	// that its YAML is parsed once per version rather than per request.
	mu     sync.Mutex
	parsed parsedTaintRules
}

// parsedTaintRules is the result of ParseTaintRules for one version of the
// rules ConfigMap.
type parsedTaintRules struct {
	uid             types.UID
	resourceVersion string
	rules           []TaintRule
	err             error
}

// configMapRules returns ParseTaintRules of the ConfigMap's rules, reusing
// the previous result while the ConfigMap's UID and resourceVersion are
// unchanged. A ConfigMap without a resourceVersion is always parsed.
func (p *ClusterTaintProvider) configMapRules(cm *corev1.ConfigMap) ([]TaintRule, error) {
	if cm.ResourceVersion == "" {
		return ParseTaintRules(cm.Data[TaintRulesConfigKey])
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.parsed; c.uid != cm.UID || c.resourceVersion != cm.ResourceVersion {
		rules, err := ParseTaintRules(cm.Data[TaintRulesConfigKey])
		p.parsed = parsedTaintRules{uid: cm.UID, resourceVersion: cm.ResourceVersion, rules: rules, err: err}
	}
	return p.parsed.rules, p.parsed.err
}

// ActiveTaints implements TaintProvider. An invalid ConfigMap is an error
// (the mutating webhook then leaves the NodePool unchanged and logs it).
func (p *ClusterTaintProvider) ActiveTaints(ctx context.Context) ([]ActiveTaint, error) {
	rules := BuiltinTaintRules()
	if p.ConfigMap.Name != "" {
		var cm corev1.ConfigMap
		err := p.Reader.Get(ctx, p.ConfigMap, &cm)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading ConfigMap %s: %w", p.ConfigMap, err)
		default:
			extra, err := p.configMapRules(&cm)
			if err != nil {
				return nil, fmt.Errorf("ConfigMap %s: %w", p.ConfigMap, err)
			}
			rules = MergeTaintRules(rules, extra)
		}
	}
	var out []ActiveTaint
	for _, r := range rules {
		on, err := p.applies(ctx, r)
		if err != nil {
			return nil, err
		}
		if on {
			for _, t := range r.Taints {
				out = append(out, ActiveTaint{Rule: r.Name, Taint: t})
			}
		}
	}
	return out, nil
}

func (p *ClusterTaintProvider) applies(ctx context.Context, r TaintRule) (bool, error) {
	if r.Enabled != nil {
		return *r.Enabled, nil
	}
	if r.DaemonSetSelector == "" {
		return false, nil
	}
	sel, err := labels.Parse(r.DaemonSetSelector)
	if err != nil {
		return false, fmt.Errorf("rule %s: daemonSetSelector: %w", r.Name, err)
	}
	// Only whether a DaemonSet matches matters: skip the cache's deep copy
	// of the matches, which are never read.
	for _, ns := range p.namespaces() {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DaemonSetList"))
		if err := p.Reader.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
			return false, fmt.Errorf("rule %s: listing DaemonSets in namespace %s: %w", r.Name, ns, err)
		}
		if len(list.Items) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// StaticTaintProvider is a TaintProvider with a fixed answer, for tests and
// for clusters that configure rules only by flag.
type StaticTaintProvider []ActiveTaint

// ActiveTaints implements TaintProvider.
func (s StaticTaintProvider) ActiveTaints(context.Context) ([]ActiveTaint, error) {
	return append([]ActiveTaint(nil), s...), nil
}

// missingTaints returns the active taints whose key/effect pair is in
// neither startupTaints nor taints (Karpenter rejects a pair that appears
// twice across both lists), without duplicates, in active order.
func missingTaints(active []ActiveTaint, startupTaints, taints []corev1.Taint) []ActiveTaint {
	type keyEffect struct {
		key    string
		effect corev1.TaintEffect
	}
	have := map[keyEffect]bool{}
	for _, t := range startupTaints {
		have[keyEffect{t.Key, t.Effect}] = true
	}
	for _, t := range taints {
		have[keyEffect{t.Key, t.Effect}] = true
	}
	var out []ActiveTaint
	for _, a := range active {
		k := keyEffect{a.Taint.Key, a.Taint.Effect}
		if have[k] {
			continue
		}
		have[k] = true
		out = append(out, a)
	}
	return out
}

// taintSummary is the admission warning naming the added taints, at most
// maxLen bytes: "karpx added startupTaints k:E, k:E (+2 more)".
func taintSummary(added []ActiveTaint, maxLen int) string {
	names := make([]string, len(added))
	for i, a := range added {
		names[i] = a.Taint.Key + ":" + string(a.Taint.Effect)
	}
	const prefix = "karpx added startupTaints "
	for n := len(names); n > 0; n-- {
		s := prefix + strings.Join(names[:n], ", ")
		if n < len(names) {
			s += fmt.Sprintf(" (+%d more)", len(names)-n)
		}
		if len(s) <= maxLen {
			return s
		}
	}
	return fmt.Sprintf("karpx added %d startupTaints", len(names))
}

// ruleNames returns the sorted distinct rule names of added.
func ruleNames(added []ActiveTaint) []string {
	set := map[string]bool{}
	for _, a := range added {
		set[a.Rule] = true
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
