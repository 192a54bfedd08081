package lint

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
	yaml "go.yaml.in/yaml/v3"

	apisv1 "github.com/karpx/karpx/apis/v1"
)

// ruleSwapOn is the internal rule of a shellEffect or Finding that turns
// swap on. CheckUserData turns it into a KX013 finding when kubelet's
// failSwapOn stays true for the userData (kubeletAllowsSwap), and drops
// it otherwise; it never leaves the package.
const ruleSwapOn = "swap-on"

// swapWhat names what the command name args does when it turns swap on:
// swapon with a device, file or -a (not its query options), or systemctl
// start/enable --now/restart of a .swap unit (systemd.swap(5)). "" when it
// does not.
func swapWhat(name string, args []arg) string {
	switch name {
	case "swapon":
		for _, a := range args {
			if a.is("-s", "--summary", "--show", "-h", "--help", "-V", "--version") || strings.HasPrefix(a.first(), "--show=") {
				return ""
			}
		}
		return strings.TrimSpace("swapon " + joinFirst(args))
	case "systemctl":
		ops := operandsOf(args)
		if len(ops) < 2 || !ops[0].is("start", "restart", "enable", "reenable") {
			return ""
		}
		if ops[0].is("enable", "reenable") && !hasNow(args) {
			return "" // enabled for the next boot only
		}
		for _, u := range ops[1:] {
			if strings.HasSuffix(u.first(), ".swap") || u.is("swap.target") {
				return "systemctl " + ops[0].first() + " " + u.first()
			}
		}
	}
	return ""
}

func hasNow(args []arg) bool {
	for _, a := range args {
		if a.is("--now") {
			return true
		}
	}
	return false
}

// cloudConfigSwap reports cloud-config that turns swap on: the swap module
// with a size other than 0 (cloud-init docs, module "Mounts": swap
// filename, size, maxsize; size 0 disables it), or a mounts entry whose
// file system type is swap, which the same module activates.
func cloudConfigSwap(s segment, key string, val *yaml.Node, idx func(*yaml.Node) int) []Finding {
	marker := func(n *yaml.Node, what string) Finding {
		return Finding{RuleID: ruleSwapOn, Field: "spec.userData", Line: s.lineOf(idx(n)), Message: what + s.where(idx(n))}
	}
	switch key {
	case "swap":
		if val.Kind != yaml.MappingNode {
			return nil
		}
		size, _ := scalarAt(val, "size")
		if size == "" || size == "0" {
			return nil // no size: cloud-init makes no swap file
		}
		return []Finding{marker(mapValue(val, "size"), "cloud-config swap (size "+size+")")}
	case "mounts":
		if val.Kind != yaml.SequenceNode {
			return nil
		}
		for _, m := range val.Content {
			if m.Kind == yaml.SequenceNode && len(m.Content) >= 3 && m.Content[2].Kind == yaml.ScalarNode && m.Content[2].Value == "swap" {
				return []Finding{marker(m, "cloud-config mounts swap entry")}
			}
		}
	}
	return nil
}

var (
	// failSwapOnFalseRE matches kubelet's failSwapOn set to false as a
	// command-line flag (--fail-swap-on=false) or in a KubeletConfiguration
	// written as YAML or JSON by the userData (failSwapOn: false).
	failSwapOnFalseRE = regexp.MustCompile(`--fail-swap-on[= ]+(false|0)\b|"?failSwapOn"?\s*:\s*false\b`)
)

// kubeletAllowsSwap reports whether kubelet may start with swap on for
// userData text of family: failSwapOn is false in a NodeConfig's
// spec.kubelet.config or flags, or --fail-swap-on=false / failSwapOn:
// false appears anywhere in the text (bootstrap.sh --kubelet-extra-args,
// a kubelet config file the script writes). kubelet's default is true
// (Kubernetes docs, kubelet --fail-swap-on; KubeletConfiguration
// failSwapOn). Families other than AL2 and AL2023 are not judged (true):
// Bottlerocket and Windows have no swap setup in userData, and a Custom
// AMI's kubelet configuration is its own.
func kubeletAllowsSwap(family, text string) bool {
	if family != apisv1.AMIFamilyAL2 && family != apisv1.AMIFamilyAL2023 {
		return true
	}
	if dec, ok, _ := base64UserData(text); ok {
		text = dec
	}
	return failSwapOnFalseRE.MatchString(text)
}

// resolveSwap turns the swap markers of fs into KX013 findings when
// kubelet will refuse to start (kubeletAllowsSwap is false), and drops
// them otherwise.
func resolveSwap(family, text string, fs Findings) Findings {
	has := false
	for _, f := range fs {
		if f.RuleID == ruleSwapOn {
			has = true
			break
		}
	}
	if !has {
		return fs
	}
	allowed := kubeletAllowsSwap(family, text)
	out := fs[:0]
	for _, f := range fs {
		if f.RuleID != ruleSwapOn {
			out = append(out, f)
			continue
		}
		if allowed {
			continue
		}
		out = append(out, userDataFinding(RuleUserDataNodeJoin, f.Line,
			fmt.Sprintf("turns swap on (%s) while kubelet's failSwapOn is true, its default: kubelet refuses to start with swap on, so the node never joins the cluster", f.Message),
			"remove the swap setup, or set failSwapOn: false in the NodeConfig's spec.kubelet.config (AL2023; --fail-swap-on=false in --kubelet-extra-args on AL2) together with memorySwap.swapBehavior: LimitedSwap"))
	}
	return out
}

// nodeConfigJoinFindings reports NodeConfig settings with which the node
// cannot join: a spec.containerd.config that is not valid TOML (nodeadm
// merges it into containerd's config.toml and fails, so neither containerd
// nor kubelet starts; nodeadm API reference, ContainerdOptions.config:
// "inline containerd configuration TOML that will be merged with the
// defaults"). lineOffset is added to node lines to map them into
// spec.userData.
func nodeConfigJoinFindings(docs []NodeConfigDocument, lineOffset int) []Finding {
	var out []Finding
	for _, d := range docs {
		cfg := mapValue(mapValue(mapValue(d.Root, "spec"), "containerd"), "config")
		if cfg == nil {
			continue
		}
		key := mapKey(mapValue(mapValue(d.Root, "spec"), "containerd"), "config")
		if cfg.Kind != yaml.ScalarNode || (cfg.Tag != "!!str" && cfg.Tag != "!!null") {
			out = append(out, containerdFinding(key.Line+lineOffset, "is not a string; nodeadm reads it as TOML text"))
			continue
		}
		line, msg := containerdTOMLError(cfg.Value)
		if msg == "" {
			continue
		}
		// A block scalar (config: |) starts on the line after its key;
		// a quoted or plain one on the key's line.
		at := cfg.Line + lineOffset
		if cfg.Style == yaml.LiteralStyle || cfg.Style == yaml.FoldedStyle {
			at += line
		}
		out = append(out, containerdFinding(at, msg))
	}
	return out
}

// containerdTOMLError parses a containerd configuration as TOML v1.0.0
// (containerd's config.toml format) and returns the 1-based line within it
// and the message of its first error, or "" when it parses. Nesting deeper
// than MaxTOMLDepth is refused without running the parser.
func containerdTOMLError(text string) (int, string) {
	if depth, line := tomlNesting(text); depth > MaxTOMLDepth {
		return line, fmt.Sprintf("nests arrays or inline tables more than %d levels deep", MaxTOMLDepth)
	}
	var tree map[string]any
	_, err := toml.Decode(text, &tree)
	if err == nil {
		return 0, ""
	}
	var pe toml.ParseError
	if errors.As(err, &pe) {
		line := pe.Position.Line
		if s := pe.Position.Start; s >= 0 && s < len(text) {
			line = 1 + strings.Count(text[:s], "\n")
		}
		return line, fmt.Sprintf("is not valid TOML at its line %d: %s", line, pe.Message)
	}
	return 1, "is not valid TOML: " + err.Error()
}

func containerdFinding(line int, msg string) Finding {
	return userDataFinding(RuleUserDataNodeJoin, line,
		"NodeConfig spec.containerd.config "+msg+"; nodeadm cannot merge it into containerd's configuration, containerd and kubelet do not start and the node never joins the cluster",
		"fix the TOML of spec.containerd.config (a table such as [plugins.\"io.containerd.grpc.v1.cri\".containerd] on its own line, quoted strings); check it with a TOML parser before applying")
}
