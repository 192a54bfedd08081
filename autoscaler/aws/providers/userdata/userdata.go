package userdata

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/lint"
)

// Boundary is the fixed MIME boundary of generated documents; fixed so that
// output is deterministic.
const Boundary = "//"

// DefaultClusterCIDR is the Kubernetes service CIDR EKS uses when none is
// chosen; AL2023's NodeConfig requires spec.cluster.cidr.
const DefaultClusterCIDR = "10.100.0.0/16"

// Content types of MIME parts. Source: the EKS AL2023 nodeadm documentation.
const (
	ContentTypeNodeConfig = "application/node.eks.aws"
	ContentTypeShell      = `text/x-shellscript; charset="us-ascii"`
)

// Options are the inputs of Generate.
type Options struct {
	// Family is the AMI family (v1.AMIFamilyAL2023, …). Windows is not
	// supported.
	Family string
	// ClusterName is the EKS cluster name.
	ClusterName string
	// ClusterEndpoint is the API server URL, "https://…".
	ClusterEndpoint string
	// CABundle is the cluster CA certificate, base64-encoded PEM.
	CABundle string
	// ClusterCIDR is the service CIDR; empty means DefaultClusterCIDR.
	ClusterCIDR string
	// Kubelet is the EC2NodeClass's spec.kubelet, or nil.
	Kubelet *v1.KubeletConfiguration
	// Labels are the node labels to register with.
	Labels map[string]string
	// Taints are the taints (and startup taints) to register with.
	Taints []corev1.Taint
	// CustomUserData is the EC2NodeClass's spec.userData, or nil.
	CustomUserData *string
}

// Generate returns the userData (not base64-encoded) for o. Errors name
// spec.userData when the user's data cannot be parsed for merging, and
// spec.amiFamily for unsupported families.
func Generate(o Options) (string, error) {
	custom := ""
	if o.CustomUserData != nil {
		custom = *o.CustomUserData
	}
	// EC2 refuses more anyway; not parsing it keeps a hostile EC2NodeClass
	// the webhook never saw from costing the controller unbounded work.
	if len(custom) > lint.MaxUserDataBytes {
		return "", fmt.Errorf("spec.userData is %d bytes; EC2 accepts at most %d (16 KB) before base64", len(custom), lint.MaxUserDataBytes)
	}
	if o.ClusterCIDR == "" {
		o.ClusterCIDR = DefaultClusterCIDR
	}
	switch o.Family {
	case v1.AMIFamilyAL2023:
		parts, err := splitParts(custom, true)
		if err != nil {
			return "", err
		}
		nc, err := nodeConfig(o)
		if err != nil {
			return "", err
		}
		return joinParts(append(parts, part{"Content-Type: " + ContentTypeNodeConfig, nc})), nil
	case v1.AMIFamilyAL2:
		parts, err := splitParts(custom, false)
		if err != nil {
			return "", err
		}
		return joinParts(append(parts, part{"Content-Type: " + ContentTypeShell, bootstrapScript(o)})), nil
	case v1.AMIFamilyBottlerocket:
		return bottlerocket(o, custom)
	case v1.AMIFamilyCustom:
		return custom, nil
	}
	return "", fmt.Errorf("spec.amiFamily %q: karpx generates userData for AL2023, AL2, Bottlerocket and Custom only", o.Family)
}

// part is one MIME part of the merged document: its header block as
// written (one "Name: value" per line) and its body as written.
type part struct {
	header string
	body   string
}

// splitParts returns the MIME parts of custom userData, or one part when it
// is not MIME. nodeConfigAware types a bare NodeConfig as such. MIME is
// read with lint.ParseMIME, the parser the admission webhook and `kubectl
// karpx lint` use, so what they admit is what is merged; each top-level
// part is copied as written (headers such as Content-Transfer-Encoding,
// and nested multiparts, included).
func splitParts(custom string, nodeConfigAware bool) ([]part, error) {
	if strings.TrimSpace(custom) == "" {
		return nil, nil
	}
	if !lint.LooksLikeMIME(custom) {
		ct := ContentTypeShell
		if nodeConfigAware && strings.Contains(custom, "node.eks.aws/") && strings.Contains(custom, "NodeConfig") {
			ct = ContentTypeNodeConfig
		}
		return []part{{"Content-Type: " + ct, custom}}, nil
	}
	doc, err := lint.ParseMIME(custom)
	if err != nil {
		return nil, fmt.Errorf("spec.userData: %w", err)
	}
	parts := make([]part, 0, len(doc.Parts))
	for _, p := range doc.Parts {
		header := p.RawHeader
		if p.Header.Get("Content-Type") == "" {
			// A part without a type is text/plain (RFC 2045); karpx has
			// always run such parts as shell scripts.
			header = strings.TrimPrefix(header+"\nContent-Type: "+ContentTypeShell, "\n")
		}
		parts = append(parts, part{header, p.RawBody})
	}
	return parts, nil
}

func joinParts(parts []part) string {
	var b strings.Builder
	fmt.Fprintf(&b, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=%q\n\n", Boundary)
	for _, p := range parts {
		fmt.Fprintf(&b, "--%s\n%s\n\n%s", Boundary, p.header, p.body)
		if !strings.HasSuffix(p.body, "\n") {
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "--%s--\n", Boundary)
	return b.String()
}

// nodeConfig renders karpx's AL2023 NodeConfig.
func nodeConfig(o Options) (string, error) {
	type cluster struct {
		Name                 string `json:"name"`
		APIServerEndpoint    string `json:"apiServerEndpoint"`
		CertificateAuthority string `json:"certificateAuthority"`
		CIDR                 string `json:"cidr"`
	}
	type kubelet struct {
		Config map[string]any `json:"config,omitempty"`
		Flags  []string       `json:"flags,omitempty"`
	}
	doc := map[string]any{
		"apiVersion": "node.eks.aws/v1alpha1",
		"kind":       "NodeConfig",
		"spec": map[string]any{
			"cluster": cluster{Name: o.ClusterName, APIServerEndpoint: o.ClusterEndpoint, CertificateAuthority: o.CABundle, CIDR: o.ClusterCIDR},
			"kubelet": kubelet{Config: kubeletConfig(o.Kubelet), Flags: kubeletFlags(o)},
		},
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("encoding NodeConfig: %w", err)
	}
	return string(out), nil
}

// kubeletConfig maps spec.kubelet to KubeletConfiguration fields.
func kubeletConfig(k *v1.KubeletConfiguration) map[string]any {
	if k == nil {
		return nil
	}
	c := map[string]any{}
	set := func(key string, v any, ok bool) {
		if ok {
			c[key] = v
		}
	}
	set("clusterDNS", k.ClusterDNS, len(k.ClusterDNS) > 0)
	set("maxPods", deref(k.MaxPods), k.MaxPods != nil)
	set("podsPerCore", deref(k.PodsPerCore), k.PodsPerCore != nil)
	set("systemReserved", k.SystemReserved, len(k.SystemReserved) > 0)
	set("kubeReserved", k.KubeReserved, len(k.KubeReserved) > 0)
	set("evictionHard", k.EvictionHard, len(k.EvictionHard) > 0)
	set("evictionSoft", k.EvictionSoft, len(k.EvictionSoft) > 0)
	if len(k.EvictionSoftGracePeriod) > 0 {
		gp := map[string]string{}
		for key, d := range k.EvictionSoftGracePeriod {
			gp[key] = d.Duration.String()
		}
		c["evictionSoftGracePeriod"] = gp
	}
	set("evictionMaxPodGracePeriod", deref(k.EvictionMaxPodGracePeriod), k.EvictionMaxPodGracePeriod != nil)
	set("imageGCHighThresholdPercent", deref(k.ImageGCHighThresholdPercent), k.ImageGCHighThresholdPercent != nil)
	set("imageGCLowThresholdPercent", deref(k.ImageGCLowThresholdPercent), k.ImageGCLowThresholdPercent != nil)
	if k.CPUCFSQuota != nil {
		c["cpuCFSQuota"] = *k.CPUCFSQuota
	}
	if len(c) == 0 {
		return nil
	}
	return c
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// kubeletFlags returns --node-labels and --register-with-taints, sorted.
func kubeletFlags(o Options) []string {
	var flags []string
	if l := labelList(o.Labels); l != "" {
		flags = append(flags, "--node-labels="+l)
	}
	if t := taintList(o.Taints); t != "" {
		flags = append(flags, "--register-with-taints="+t)
	}
	return flags
}

// labelList renders the kubelet-settable labels as "k=v,k=v", sorted.
func labelList(labels map[string]string) string {
	var kv []string
	for k, v := range labels {
		if KubeletMaySet(k) {
			kv = append(kv, k+"="+v)
		}
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// taintList renders taints as "k=v:Effect,k:Effect", deduplicated and sorted.
func taintList(taints []corev1.Taint) string {
	seen := map[string]bool{}
	var out []string
	for _, t := range taints {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		s += ":" + string(t.Effect)
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// kubeletLabels are the kubernetes.io and k8s.io labels the NodeRestriction
// admission plugin lets a kubelet set on its own Node. Source: Kubernetes
// plugin/pkg/admission/noderestriction and kubelet's --node-labels help.
var kubeletLabels = map[string]bool{
	"kubernetes.io/hostname":                   true,
	"kubernetes.io/instance-type":              true,
	"kubernetes.io/os":                         true,
	"kubernetes.io/arch":                       true,
	"beta.kubernetes.io/instance-type":         true,
	"beta.kubernetes.io/os":                    true,
	"beta.kubernetes.io/arch":                  true,
	"failure-domain.beta.kubernetes.io/zone":   true,
	"failure-domain.beta.kubernetes.io/region": true,
	"failure-domain.kubernetes.io/zone":        true,
	"failure-domain.kubernetes.io/region":      true,
	"topology.kubernetes.io/zone":              true,
	"topology.kubernetes.io/region":            true,
}

// KubeletMaySet reports whether a kubelet may register its Node with label
// key: any key outside the kubernetes.io and k8s.io domains, the
// kubelet.kubernetes.io/ and node.kubernetes.io/ prefixes, and the
// well-known labels above.
func KubeletMaySet(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	restricted := prefix == "kubernetes.io" || strings.HasSuffix(prefix, ".kubernetes.io") || prefix == "k8s.io" || strings.HasSuffix(prefix, ".k8s.io")
	if !restricted {
		return true
	}
	return prefix == "kubelet.kubernetes.io" || prefix == "node.kubernetes.io" || kubeletLabels[key]
}

// bootstrapScript is AL2's shell part.
func bootstrapScript(o Options) string {
	var extra []string
	if l := labelList(o.Labels); l != "" {
		extra = append(extra, "--node-labels="+l)
	}
	if t := taintList(o.Taints); t != "" {
		extra = append(extra, "--register-with-taints="+t)
	}
	args := []string{"/etc/eks/bootstrap.sh " + shellQuote(o.ClusterName),
		"--apiserver-endpoint " + shellQuote(o.ClusterEndpoint),
		"--b64-cluster-ca " + shellQuote(o.CABundle)}
	if k := o.Kubelet; k != nil {
		if len(k.ClusterDNS) > 0 {
			args = append(args, "--dns-cluster-ip "+shellQuote(k.ClusterDNS[0]))
		}
		if k.MaxPods != nil {
			args = append(args, "--use-max-pods false")
			extra = append(extra, fmt.Sprintf("--max-pods=%d", *k.MaxPods))
		}
	}
	if len(extra) > 0 {
		args = append(args, "--kubelet-extra-args "+shellQuote(strings.Join(extra, " ")))
	}
	return "#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log | logger -t user-data -s 2>/dev/console) 2>&1\n" + strings.Join(args, " \\\n  ") + "\n"
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// bottlerocket merges karpx's settings into the user's TOML.
func bottlerocket(o Options, custom string) (string, error) {
	doc := map[string]any{}
	if strings.TrimSpace(custom) != "" {
		// lint's parser: TOML with the webhook's nesting bound.
		s, err := lint.ParseBottlerocketTOML(custom)
		if err != nil {
			return "", fmt.Errorf("spec.userData: Bottlerocket userData must be TOML: %w", err)
		}
		doc = s.Tree
	}
	settings := table(doc, "settings")
	k8s := table(settings, "kubernetes")
	k8s["cluster-name"] = o.ClusterName
	k8s["api-server"] = o.ClusterEndpoint
	k8s["cluster-certificate"] = o.CABundle
	labels := table(k8s, "node-labels")
	for k, v := range o.Labels {
		if KubeletMaySet(k) {
			labels[k] = v
		}
	}
	if len(o.Taints) > 0 {
		taints := table(k8s, "node-taints")
		byKey := map[string][]string{}
		for _, t := range o.Taints {
			byKey[t.Key] = append(byKey[t.Key], t.Value+":"+string(t.Effect))
		}
		for k, vs := range byKey {
			sort.Strings(vs)
			taints[k] = vs
		}
	}
	if k := o.Kubelet; k != nil {
		if len(k.ClusterDNS) > 0 {
			k8s["cluster-dns-ip"] = k.ClusterDNS
		}
		if k.MaxPods != nil {
			k8s["max-pods"] = *k.MaxPods
		}
		if k.PodsPerCore != nil {
			k8s["pods-per-core"] = *k.PodsPerCore
		}
		for key, m := range map[string]map[string]string{"system-reserved": k.SystemReserved, "kube-reserved": k.KubeReserved, "eviction-hard": k.EvictionHard} {
			if len(m) > 0 {
				t := table(k8s, key)
				for mk, mv := range m {
					t[mk] = mv
				}
			}
		}
		if k.ImageGCHighThresholdPercent != nil {
			k8s["image-gc-high-threshold-percent"] = *k.ImageGCHighThresholdPercent
		}
		if k.ImageGCLowThresholdPercent != nil {
			k8s["image-gc-low-threshold-percent"] = *k.ImageGCLowThresholdPercent
		}
		if k.CPUCFSQuota != nil {
			k8s["cpu-cfs-quota-enforced"] = *k.CPUCFSQuota
		}
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(doc); err != nil {
		return "", fmt.Errorf("encoding Bottlerocket settings: %w", err)
	}
	return buf.String(), nil
}

// table returns m[key] as a TOML table, creating (or replacing a non-table
// value with) an empty one.
func table(m map[string]any, key string) map[string]any {
	if t, ok := m[key].(map[string]any); ok {
		return t
	}
	t := map[string]any{}
	m[key] = t
	return t
}
