package lint

import (
	"fmt"
	"sort"
	"strings"
)

// Severity says what a Finding does to an admission request.
type Severity string

const (
	// SeverityDeny rejects the request (webhook) or makes the linter exit 1.
	SeverityDeny Severity = "deny"
	// SeverityWarning admits the request with an admission warning.
	SeverityWarning Severity = "warning"
)

// MaxWarningLength is the longest admission warning the webhook returns, in
// bytes. Kubernetes recommends warnings of at most 120 characters so that
// kubectl prints each on one line (KEP-1693, "Warning mechanism for use of
// deprecated APIs", which kubectl and the API server follow).
const MaxWarningLength = 120

// Finding is one problem found in one object.
type Finding struct {
	// RuleID is the stable rule identifier, for example "KX003".
	RuleID string `json:"rule"`
	// Severity is the rule's severity for this finding (a denial may be
	// downgraded to a warning by Ratchet).
	Severity Severity `json:"severity"`
	// Kind is the object's kind, "EC2NodeClass" or "NodePool".
	Kind string `json:"kind"`
	// Name is the object's metadata.name.
	Name string `json:"name"`
	// Field is the JSON path of the offending field, for example
	// "spec.userData" or "spec.disruption.budgets[0].schedule".
	Field string `json:"field"`
	// Line is the 1-based line inside Field (userData only), 0 when the
	// finding is about the whole field.
	Line int `json:"line,omitempty"`
	// Message says what is wrong, without the fix.
	Message string `json:"message"`
	// Fix says how to correct it.
	Fix string `json:"fix"`

	// unresolved marks a KX009 finding about a command karpx cannot
	// determine (rather than a part it cannot decode): its severity
	// follows Options.Unresolved.
	unresolved bool
	// secret is the credential a secret finding (KX004–KX006, KX012) is
	// about, for deduplicating the same value found at two decoding steps
	// (dedupeSecrets); never printed or serialised.
	secret string
}

// Location returns the field and line, for example "spec.userData line 7".
func (f Finding) Location() string {
	if f.Line > 0 {
		return fmt.Sprintf("%s line %d", f.Field, f.Line)
	}
	return f.Field
}

// head is "KX003 spec.userData line 7: ", or "KX011 " without a location.
func (f Finding) head() string {
	if loc := f.Location(); loc != "" {
		return f.RuleID + " " + loc + ": "
	}
	return f.RuleID + " "
}

// String returns the full, human-readable finding:
// "KX003 spec.userData line 7: <message>; fix: <fix>".
func (f Finding) String() string {
	s := f.head() + f.Message
	if f.Fix != "" {
		s += "; fix: " + f.Fix
	}
	return s
}

// Warning returns the finding shortened to at most MaxWarningLength bytes,
// for use as an admission warning: rule ID, location and message, then the
// fix if it still fits. The full text is in String.
func (f Finding) Warning() string {
	s := f.head() + f.Message
	if withFix := s + "; fix: " + f.Fix; f.Fix != "" && len(withFix) <= MaxWarningLength {
		return withFix
	}
	return truncate(s, MaxWarningLength)
}

// truncate shortens s to at most n bytes, ending in "…" when cut, without
// splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…" // 3 bytes
	cut := n - len(ellipsis)
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Findings is a list of findings with helpers.
type Findings []Finding

// Denied reports whether any finding has SeverityDeny.
func (fs Findings) Denied() bool {
	for _, f := range fs {
		if f.Severity == SeverityDeny {
			return true
		}
	}
	return false
}

// Denials returns the findings with SeverityDeny.
func (fs Findings) Denials() Findings { return fs.filter(SeverityDeny) }

// Warnings returns the findings with SeverityWarning.
func (fs Findings) Warnings() Findings { return fs.filter(SeverityWarning) }

func (fs Findings) filter(s Severity) Findings {
	var out Findings
	for _, f := range fs {
		if f.Severity == s {
			out = append(out, f)
		}
	}
	return out
}

// Without returns the findings whose rule is not in ids (rule IDs such as
// "KX101"); it is how callers disable rules.
func (fs Findings) Without(ids map[string]bool) Findings {
	if len(ids) == 0 {
		return fs
	}
	var out Findings
	for _, f := range fs {
		if !ids[f.RuleID] {
			out = append(out, f)
		}
	}
	return out
}

// Sort orders findings by kind, name, field, line and rule ID, so output is
// stable.
func (fs Findings) Sort() {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		switch {
		case a.Kind != b.Kind:
			return a.Kind < b.Kind
		case a.Name != b.Name:
			return a.Name < b.Name
		case a.Field != b.Field:
			return a.Field < b.Field
		case a.Line != b.Line:
			return a.Line < b.Line
		default:
			return a.RuleID < b.RuleID
		}
	})
}

// DenialMessage joins the denials into the message of a rejected admission
// request: "denied by karpx: KX003 spec.userData line 7: …; fix: …". It
// returns "" when there is no denial.
func (fs Findings) DenialMessage() string {
	d := fs.Denials()
	if len(d) == 0 {
		return ""
	}
	parts := make([]string, len(d))
	for i, f := range d {
		parts[i] = f.String()
	}
	return "denied by karpx: " + strings.Join(parts, "; ")
}

// Ratchet lets existing problems through an update: every denial in current
// that also appears in previous (same rule, field, line and message) — that
// is, the update did not introduce it — becomes a warning prefixed with
// "unchanged: ". Objects admitted before a rule existed can still be edited
// (for example to fix another field) without first fixing every old problem,
// as with Kubernetes' own validation ratcheting (KEP-4008).
func Ratchet(current, previous Findings) Findings {
	if len(previous) == 0 {
		return current
	}
	type key struct {
		rule, field, msg string
		line             int
	}
	old := make(map[key]bool, len(previous))
	for _, f := range previous {
		if f.Severity == SeverityDeny {
			old[key{f.RuleID, f.Field, f.Message, f.Line}] = true
		}
	}
	out := make(Findings, len(current))
	for i, f := range current {
		if f.Severity == SeverityDeny && old[key{f.RuleID, f.Field, f.Message, f.Line}] {
			f.Severity = SeverityWarning
			f.Message = "unchanged: " + f.Message
		}
		out[i] = f
	}
	return out
}

// Unresolved reports whether f is a KX009 finding about a command karpx
// cannot determine (docs/rules.md, "The principle"), as opposed to a part
// it cannot decode; ParseUnresolvedSeverity and WithUnresolvedSeverity
// let a deployment choose what such a finding does.
func (f Finding) Unresolved() bool { return f.unresolved }

// WithUnresolvedSeverity returns f with Severity sev when f is Unresolved,
// else f unchanged. sev is SeverityDeny (the default: unknown is never
// allowed) or SeverityWarning.
func (f Finding) WithUnresolvedSeverity(sev Severity) Finding {
	if f.unresolved && sev != "" {
		f.Severity = sev
	}
	return f
}

// WithUnresolvedSeverity returns a copy of fs with every Unresolved
// finding's severity set to sev (SeverityDeny or SeverityWarning).
func (fs Findings) WithUnresolvedSeverity(sev Severity) Findings {
	if sev == "" || sev == SeverityDeny {
		return fs
	}
	out := make(Findings, len(fs))
	for i, f := range fs {
		out[i] = f.WithUnresolvedSeverity(sev)
	}
	return out
}

// UnresolvedFlagUsage is the help text of the webhook's and the plugin's
// --uninspectable-commands flag.
const UnresolvedFlagUsage = "What a command karpx cannot determine (KX009, docs/rules.md \"The principle\") does: deny (default) or warn"

// ParseUnresolvedSeverity reads the --uninspectable-commands setting:
// "deny" (or "") is SeverityDeny, "warn" or "warning" SeverityWarning;
// anything else is an error naming the flag and the values it takes.
func ParseUnresolvedSeverity(s string) (Severity, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "deny":
		return SeverityDeny, nil
	case "warn", "warning":
		return SeverityWarning, nil
	}
	return "", fmt.Errorf("--uninspectable-commands %q: want deny or warn", s)
}
