package ec2sim

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/shell"
	"mvdan.cc/sh/v3/syntax"
	"sigs.k8s.io/yaml"
)

// What a node's user data tells its kubelet to register with. A real
// kubelet knows nothing of NodeClaims: the labels and taints of its Node
// come from its flags and configuration, which the AMI's bootstrap derives
// from the user data. The emulated kubelet reads them the same way, per
// AMI family:
//
//   - AL2023 (nodeadm): every NodeConfig (apiVersion node.eks.aws/*,
//     kind NodeConfig) of the user data, a MIME multipart document whose
//     parts of Content-Type application/node.eks.aws nodeadm reads, or a
//     bare NodeConfig; in order, later ones win:
//     spec.kubelet.flags --node-labels and --register-with-taints, and
//     spec.kubelet.config.registerWithTaints (a KubeletConfiguration
//     field, the way Karpenter passes taints).
//   - AL2 (bootstrap.sh): the --kubelet-extra-args of the
//     /etc/eks/bootstrap.sh call of a shell script (a text/x-shellscript
//     part of a MIME document, or the whole user data): --node-labels and
//     --register-with-taints.
//   - Bottlerocket: the TOML settings.kubernetes.node-labels (key →
//     value) and settings.kubernetes.node-taints (key → ["value:Effect"]).
//
// Flag values are shell words (Karpenter writes --node-labels="k=v,..."),
// unquoted with mvdan.cc/sh. Sources: amazon-eks-ami nodeadm's NodeConfig
// API (node.eks.aws/v1alpha1) and bootstrap.sh; Bottlerocket's settings
// reference (settings.kubernetes.node-labels, node-taints); kubelet's
// --node-labels and --register-with-taints help. A user data the bootstrap
// could not read (malformed MIME, YAML or TOML, a taint without a valid
// effect) is a kubelet that never starts: the instance never registers
// (registrationOf returns the error, which the kubelet pass logs).

// Content types of user data parts (nodeadm and cloud-init).
const (
	contentTypeNodeConfig = "application/node.eks.aws"
	contentTypeShell      = "text/x-shellscript"
)

// registration is what kubelet registers its Node with.
type registration struct {
	labels map[string]string
	taints []corev1.Taint
}

// registrationOf reads the labels and taints in userData for an AMI of
// family (familyAL2023, familyAL2, familyBottlerocket, or "" for an AMI the
// simulator does not know, whose user data is read by its shape).
func registrationOf(family, userData string) (registration, error) {
	reg := registration{labels: map[string]string{}}
	if strings.TrimSpace(userData) == "" {
		return reg, nil
	}
	if family == familyBottlerocket || (family == "" && looksLikeTOML(userData)) {
		return reg, reg.bottlerocket(userData)
	}
	if looksLikeMIME(userData) {
		return reg, reg.mimeDocument(userData)
	}
	if isNodeConfig(userData) {
		return reg, reg.nodeConfig(userData)
	}
	return reg, reg.shellScript(userData)
}

func looksLikeMIME(s string) bool {
	t := strings.TrimSpace(s)
	return strings.HasPrefix(t, "MIME-Version:") || strings.HasPrefix(t, "Content-Type:")
}

func looksLikeTOML(s string) bool {
	var doc map[string]any
	_, err := toml.Decode(s, &doc)
	_, ok := doc["settings"]
	return err == nil && ok
}

func isNodeConfig(s string) bool {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	return yaml.Unmarshal([]byte(s), &head) == nil && strings.HasPrefix(head.APIVersion, "node.eks.aws/") && head.Kind == "NodeConfig"
}

// mimeDocument reads the parts of a MIME multipart user data in order
// (nested multiparts included).
func (r *registration) mimeDocument(doc string) error {
	// Karpenter and karpx write LF line ends; MIME wants CRLF, which
	// net/mail and mime/multipart both accept either way.
	msg, err := mail.ReadMessage(strings.NewReader(strings.TrimLeft(doc, " \t\r\n")))
	if err != nil {
		return fmt.Errorf("user data: MIME header: %w", err)
	}
	return r.mimeEntity(msg.Header.Get("Content-Type"), msg.Body)
}

func (r *registration) mimeEntity(contentType string, body io.Reader) error {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Errorf("user data: Content-Type %q: %w", contentType, err)
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			part, err := mr.NextRawPart()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("user data: MIME part: %w", err)
			}
			ct := part.Header.Get("Content-Type")
			if ct == "" {
				ct = "text/plain"
			}
			if err := r.mimeEntity(ct, decodedPart(part.Header, part)); err != nil {
				return err
			}
		}
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		return fmt.Errorf("user data: MIME part: %w", err)
	}
	switch mt {
	case contentTypeNodeConfig:
		return r.nodeConfig(string(raw))
	case contentTypeShell:
		return r.shellScript(string(raw))
	}
	return nil // cloud-config and other parts set no kubelet flag
}

// decodedPart undoes a base64 Content-Transfer-Encoding (the only one
// besides the identity encodings that user data parts use).
func decodedPart(h textproto.MIMEHeader, body io.Reader) io.Reader {
	if strings.EqualFold(strings.TrimSpace(h.Get("Content-Transfer-Encoding")), "base64") {
		return base64.NewDecoder(base64.StdEncoding, body) // skips line breaks
	}
	return body
}

// nodeConfig applies one NodeConfig document (YAML; a part may hold
// several, separated by "---").
func (r *registration) nodeConfig(doc string) error {
	for _, d := range splitYAMLDocuments(doc) {
		var nc struct {
			Kind string `json:"kind"`
			Spec struct {
				Kubelet struct {
					Config map[string]json.RawMessage `json:"config"`
					Flags  []string                   `json:"flags"`
				} `json:"kubelet"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(d), &nc); err != nil {
			return fmt.Errorf("user data: NodeConfig: %w", err)
		}
		if nc.Kind != "NodeConfig" {
			continue
		}
		if raw, ok := nc.Spec.Kubelet.Config["registerWithTaints"]; ok {
			var taints []corev1.Taint
			if err := json.Unmarshal(raw, &taints); err != nil {
				return fmt.Errorf("user data: NodeConfig spec.kubelet.config.registerWithTaints: %w", err)
			}
			for _, t := range taints {
				if !validEffect(t.Effect) {
					return fmt.Errorf("user data: NodeConfig spec.kubelet.config.registerWithTaints: taint %q has effect %q; use NoSchedule, PreferNoSchedule or NoExecute", t.Key, t.Effect)
				}
			}
			r.taints = taints // a later configuration replaces the list
		}
		for _, f := range nc.Spec.Kubelet.Flags {
			words, err := shell.Fields(f, func(string) string { return "" })
			if err != nil {
				return fmt.Errorf("user data: NodeConfig spec.kubelet.flags %q: %w", f, err)
			}
			if err := r.kubeletFlags(words); err != nil {
				return err
			}
		}
	}
	return nil
}

func splitYAMLDocuments(s string) []string {
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 64<<10), len(s)+1)
	for sc.Scan() {
		if strings.TrimRight(sc.Text(), " \t") == "---" {
			out = append(out, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(sc.Text())
		cur.WriteByte('\n')
	}
	return append(out, cur.String())
}

// shellScript finds the /etc/eks/bootstrap.sh calls of a script and applies
// their --kubelet-extra-args.
func (r *registration) shellScript(script string) error {
	f, err := syntax.NewParser().Parse(strings.NewReader(script), "user-data")
	if err != nil {
		return fmt.Errorf("user data: shell script: %w", err)
	}
	var walkErr error
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 || walkErr != nil {
			return walkErr == nil
		}
		cmd, err := expand.Literal(nil, call.Args[0])
		if err != nil || !strings.HasSuffix(cmd, "bootstrap.sh") {
			return true
		}
		for i := 1; i < len(call.Args); i++ {
			arg, err := expand.Literal(nil, call.Args[i])
			if err != nil {
				walkErr = fmt.Errorf("user data: bootstrap.sh argument: %w", err)
				return false
			}
			val, inline := strings.CutPrefix(arg, "--kubelet-extra-args=")
			if !inline {
				if arg != "--kubelet-extra-args" || i+1 >= len(call.Args) {
					continue
				}
				i++
				if val, err = expand.Literal(nil, call.Args[i]); err != nil {
					walkErr = fmt.Errorf("user data: bootstrap.sh --kubelet-extra-args: %w", err)
					return false
				}
			}
			words, err := shell.Fields(val, func(string) string { return "" })
			if err != nil {
				walkErr = fmt.Errorf("user data: bootstrap.sh --kubelet-extra-args %q: %w", val, err)
				return false
			}
			if walkErr = r.kubeletFlags(words); walkErr != nil {
				return false
			}
		}
		return true
	})
	return walkErr
}

// kubeletFlags applies --node-labels and --register-with-taints of a
// kubelet command line (either "--flag=value" or "--flag value"); labels
// accumulate, later values win; a later --register-with-taints replaces
// the taints.
func (r *registration) kubeletFlags(words []string) error {
	for i := 0; i < len(words); i++ {
		name, val, hasVal := strings.Cut(words[i], "=")
		if name != "--node-labels" && name != "--register-with-taints" {
			continue
		}
		if !hasVal && i+1 < len(words) {
			i++
			val = words[i]
		}
		if name == "--node-labels" {
			for _, kv := range splitList(val) {
				k, v, _ := strings.Cut(kv, "=")
				if k == "" {
					return fmt.Errorf("user data: kubelet --node-labels %q: empty key", val)
				}
				r.labels[k] = v
			}
			continue
		}
		var taints []corev1.Taint
		for _, spec := range splitList(val) {
			t, err := parseTaint(spec)
			if err != nil {
				return fmt.Errorf("user data: kubelet --register-with-taints: %w", err)
			}
			taints = append(taints, t)
		}
		r.taints = taints
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// parseTaint reads kubelet's "key[=value]:Effect".
func parseTaint(spec string) (corev1.Taint, error) {
	kv, effect, ok := strings.Cut(spec, ":")
	if !ok {
		return corev1.Taint{}, fmt.Errorf("taint %q has no effect; write key[=value]:Effect", spec)
	}
	k, v, _ := strings.Cut(kv, "=")
	t := corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}
	if k == "" || !validEffect(t.Effect) {
		return corev1.Taint{}, fmt.Errorf("taint %q: need a key and one of NoSchedule, PreferNoSchedule, NoExecute", spec)
	}
	return t, nil
}

func validEffect(e corev1.TaintEffect) bool {
	return e == corev1.TaintEffectNoSchedule || e == corev1.TaintEffectPreferNoSchedule || e == corev1.TaintEffectNoExecute
}

// bottlerocket reads settings.kubernetes.node-labels and node-taints.
func (r *registration) bottlerocket(doc string) error {
	var s struct {
		Settings struct {
			Kubernetes struct {
				NodeLabels map[string]string   `toml:"node-labels"`
				NodeTaints map[string][]string `toml:"node-taints"`
			} `toml:"kubernetes"`
		} `toml:"settings"`
	}
	if _, err := toml.Decode(doc, &s); err != nil {
		return fmt.Errorf("user data: Bottlerocket TOML: %w", err)
	}
	for k, v := range s.Settings.Kubernetes.NodeLabels {
		r.labels[k] = v
	}
	keys := make([]string, 0, len(s.Settings.Kubernetes.NodeTaints))
	for k := range s.Settings.Kubernetes.NodeTaints {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, ve := range s.Settings.Kubernetes.NodeTaints[k] {
			v, effect, ok := strings.Cut(ve, ":")
			t := corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)}
			if !ok || !validEffect(t.Effect) {
				return fmt.Errorf("user data: Bottlerocket settings.kubernetes.node-taints.%s %q: write \"value:Effect\" with NoSchedule, PreferNoSchedule or NoExecute", k, ve)
			}
			r.taints = append(r.taints, t)
		}
	}
	return nil
}
