package startuptaints

import corev1 "k8s.io/api/core/v1"

// Rule says which startup taints a node agent puts on (or removes from)
// new nodes, and how to tell that the agent runs in the cluster.
type Rule struct {
	// Name identifies the rule ("cilium"); in the webhook, a ConfigMap rule
	// with the name of a built-in rule overrides it.
	Name string `json:"name"`
	// Source documents where the taints come from (a URL).
	Source string `json:"source,omitempty"`
	// Taints are added to spec.template.spec.startupTaints when missing.
	Taints []corev1.Taint `json:"taints"`
	// DaemonSetSelector is a label selector ("k8s-app=cilium"); the rule
	// applies when a DaemonSet in one of the webhook's detection namespaces
	// (webhook.ClusterTaintProvider.Namespaces, --startup-taint-namespaces)
	// matches it. Empty means the rule is never detected and applies only
	// when Enabled is true.
	DaemonSetSelector string `json:"daemonSetSelector,omitempty"`
	// Enabled forces the rule on (true) or off (false); nil means "on when
	// the DaemonSet is detected".
	Enabled *bool `json:"enabled,omitempty"`
}

// Built-in rules. Each agent (or its controller) removes its taint once it
// is ready on the node, so pods that need it are not scheduled (or, for
// NoExecute, keep running) before it is. A rule is detected from its
// agent's DaemonSet only when that agent removes the taint by default.
var builtin = []Rule{
	{
		// Cilium docs, "Considerations on node pool taints and unmanaged
		// pods" (docs.cilium.io/en/stable/installation/taints/): nodes should
		// start with node.cilium.io/agent-not-ready=true; NoExecute evicts
		// pods scheduled before the agent, NoSchedule only keeps new ones off.
		// The operator removes the key whatever its effect.
		Name:   "cilium",
		Source: "https://docs.cilium.io/en/stable/installation/taints/",
		Taints: []corev1.Taint{
			{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoExecute},
			{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		},
		DaemonSetSelector: "k8s-app=cilium",
	},
	{
		// aws-ebs-csi-driver docs, install.md "Configure node startup taint":
		// ebs.csi.aws.com/agent-not-ready:NoExecute, removed by the node
		// plugin once it has registered with kubelet.
		Name:              "aws-ebs-csi-node",
		Source:            "https://github.com/kubernetes-sigs/aws-ebs-csi-driver/blob/master/docs/install.md#configure-node-startup-taint",
		Taints:            []corev1.Taint{{Key: "ebs.csi.aws.com/agent-not-ready", Effect: corev1.TaintEffectNoExecute}},
		DaemonSetSelector: "app=ebs-csi-node",
	},
	{
		// aws-efs-csi-driver README, "Configure node startup taint":
		// efs.csi.aws.com/agent-not-ready:NoExecute.
		Name:              "aws-efs-csi-node",
		Source:            "https://github.com/kubernetes-sigs/aws-efs-csi-driver#configure-node-startup-taint",
		Taints:            []corev1.Taint{{Key: "efs.csi.aws.com/agent-not-ready", Effect: corev1.TaintEffectNoExecute}},
		DaemonSetSelector: "app=efs-csi-node",
	},
	{
		// Istio (ambient) docs, "Using the untaint controller": nodes start
		// with cni.istio.io/not-ready:NoSchedule, the Karpenter example
		// uses startupTaints, and istiod's untaint controller removes the
		// taint once istio-cni is ready on the node. That controller is off
		// by default (pilot.taint.enabled and
		// PILOT_ENABLE_NODE_UNTAINT_CONTROLLERS), and without it the taint
		// would never leave the node, so the rule is not detected from the
		// istio-cni-node DaemonSet: enable it in the ConfigMap
		// ({name: istio-cni, enabled: true}) once the controller runs.
		Name:   "istio-cni",
		Source: "https://ambientmesh.io/docs/operations/untaint-controller",
		Taints: []corev1.Taint{{Key: "cni.istio.io/not-ready", Effect: corev1.TaintEffectNoSchedule}},
	},
}

// Builtin returns the built-in rules (Cilium, AWS EBS CSI node, AWS EFS CSI
// node, Istio CNI) as a fresh copy the caller may change.
func Builtin() []Rule {
	out := make([]Rule, len(builtin))
	for i, r := range builtin {
		r.Taints = append([]corev1.Taint(nil), r.Taints...)
		out[i] = r
	}
	return out
}
