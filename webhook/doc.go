// Package webhook is karpx's admission webhook for Karpenter's NodePool
// (karpenter.sh/v1) and EC2NodeClass (karpenter.k8s.aws/v1) resources. It is
// built on sigs.k8s.io/controller-runtime/pkg/webhook, deployed on its own
// (cmd/karpx-webhook, manifests/webhook), and needs nothing from the
// autoscaler, so it works as well on clusters running upstream Karpenter.
//
// # Mutating: startup taints (NodePoolDefaulter)
//
// Node agents such as Cilium, the AWS EBS and EFS CSI node plugins and the
// Istio CNI agent remove a taint from a node once they are ready on it; pods
// scheduled before that fail or run without the agent. Karpenter only starts
// nodes with those taints if the NodePool lists them in
// spec.template.spec.startupTaints, which users forget (issue P4). The
// mutating handler appends the missing ones. A rule (TaintRule) applies
// when its agent's DaemonSet is found by label selector in one of the
// startup-taint namespaces the operator names (Options.StartupTaintNamespaces,
// default kube-system; a tenant's look-alike DaemonSet elsewhere is never
// read, and the webhook may list DaemonSets only there), or
// when a ConfigMap of extra rules (TaintRulesConfigKey) enables it, so a
// cluster can add its own agents without a rebuild. The Istio CNI rule is
// opt-in: its taint is removed by istiod's untaint controller, which is off
// by default, so the DaemonSet alone does not enable it. Built-in rules and their
// sources are listed by BuiltinTaintRules.
//
// The handler is idempotent and keeps the user's taints and order; it never
// adds a key/effect pair present in startupTaints or taints; it returns one
// admission warning of at most 120 characters naming what it added; it has
// no side effects, so dry-run requests behave the same and change nothing;
// and a NodePool annotated karpx.io/startup-taints=disabled is left alone.
//
// # Validating: userData and NodePool checks (Validator)
//
// The validating handler runs the rules of package
// github.com/karpx/karpx/lint — the same rules `kubectl karpx lint` runs
// offline. Denials reject the request with each rule ID, field, line and
// fix; warnings are returned as admission warnings. NodeOverlays
// (karpenter.sh/v1alpha1) are checked against KX203, which denies no kind
// today: karpx applies them behind the NodeOverlay feature gate (package
// autoscaler/nodeoverlay), whose controller reports invalid and
// conflicting ones in their status, as Karpenter does.
//
// # Failure policies
//
// The mutating webhook is failurePolicy Ignore (a down webhook must not
// block NodePool edits); EC2NodeClass validation is Fail (bad userData is
// otherwise found only at launch); NodePool validation is Ignore;
// NodeOverlay validation is Ignore (it denies nothing today). See
// manifests/webhook/webhooks.yaml for the full trade-off.
//
// # Bounds and panics
//
// Every parser the rules run is bounded (package lint: userData over EC2's
// 16 KB is not parsed at all; nesting, alias expansion, decompression and
// part counts have limits, each reached with a KX009 finding), so one
// request costs bounded time and memory. A handler that panics anyway is
// recovered (answerRecovering): the panic is logged with its stack and
// counted in karpx_webhook_panics_total{handler}; a validating handler
// denies that request (fail closed, per request), the mutating handler
// admits the NodePool unchanged with a warning, and the process keeps
// serving.
//
// # Serving
//
// NewServer serves TLS 1.2 or later. The mutating handler is a
// controller-runtime admission.Webhook; the validating handlers decode each
// AdmissionReview once, straight into the fields the rules read
// (objectHandler): in the load test that took the webhook's CPU per
// EC2NodeClass review from about 460 to 350 µs, 290 µs with GOGC=400.
//
// Certificates are self-managed by default (AddCertRotator: a CA and a
// serving certificate generated, stored in one named Secret, renewed before
// expiry, the CA injected into caBundle; the rotator gets, watches by
// metadata.name and updates that Secret and the two webhook configurations
// only, so its RBAC names them and grants no list), or issued by
// cert-manager from a CA Issuer (CertModeCertManager).
package webhook
