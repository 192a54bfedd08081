package webhook

import (
	"flag"
	"os"
	"strings"
	"time"

	kxlint "github.com/karpx/karpx/lint"
)

// CommandFlags are cmd/karpx-webhook's command-line flags (besides
// controller-runtime's --kubeconfig and zap's --zap-*). AddFlags registers
// them; the command and test/docs (which checks that every webhook flag the
// docs name exists) share it.
type CommandFlags struct {
	// Port is the webhook server's HTTPS port (--port, default 9443).
	Port int
	// CertDir holds tls.crt and tls.key (--cert-dir).
	CertDir string
	// CertMode is CertModeSelf or CertModeCertManager (--cert-mode).
	CertMode string
	// Namespace of the webhook's Service, Secret and rules ConfigMap
	// (--namespace, default $POD_NAMESPACE or karpx-system).
	Namespace string
	// ServiceName is the webhook Service (--service-name).
	ServiceName string
	// SecretName is the Secret with the CA and serving certificate (--secret-name).
	SecretName string
	// MutatingName and ValidatingName are the webhook configurations whose
	// caBundle is kept up to date in self mode.
	MutatingName, ValidatingName string
	// TaintRules is the ConfigMap of extra startup-taint rules
	// (--startup-taint-rules-configmap; empty: built-in rules only).
	TaintRules string
	// StartupTaintNamespaces is a comma-separated list of the namespaces
	// whose DaemonSets startup-taint detection reads
	// (--startup-taint-namespaces, default DefaultStartupTaintNamespaces).
	StartupTaintNamespaces string
	// DisableRules is a comma-separated list of lint rule IDs (--disable-rules).
	DisableRules string
	// UninspectableCommands is what a command karpx cannot determine
	// does (--uninspectable-commands): "deny" (default) or "warn"
	// (lint.ParseUnresolvedSeverity).
	UninspectableCommands string
	// MetricsAddr, ProbeAddr and PprofAddr are the metrics, health probe and
	// pprof listen addresses ("0" or "" disables metrics and pprof).
	MetricsAddr, ProbeAddr, PprofAddr string
	// MetricsSecure serves metrics over HTTPS to clients whose bearer token
	// passes a TokenReview and whose user may get /metrics
	// (SubjectAccessReview) only (--metrics-secure, default true; false
	// serves plain HTTP to anyone).
	MetricsSecure bool
	// EnableHTTP2 serves HTTP/2 (--enable-http2, off: CVE-2023-44487).
	EnableHTTP2 bool
	// ShutdownDelay is how long the server keeps serving after SIGTERM,
	// answering "Connection: close" (--shutdown-delay, DefaultShutdownDelay).
	ShutdownDelay time.Duration
}

// AddFlags registers every CommandFlags field on fs with its default.
func (f *CommandFlags) AddFlags(fs *flag.FlagSet) {
	namespace := os.Getenv("POD_NAMESPACE")
	if namespace == "" {
		namespace = "karpx-system"
	}
	fs.IntVar(&f.Port, "port", 9443, "HTTPS port of the webhook server")
	fs.StringVar(&f.CertDir, "cert-dir", "/certs", "Directory holding tls.crt and tls.key (the mounted certificate Secret)")
	fs.StringVar(&f.CertMode, "cert-mode", CertModeSelf, "Certificate management: self (the webhook generates and rotates its CA and certificate in --secret-name) or cert-manager")
	fs.StringVar(&f.Namespace, "namespace", namespace, "Namespace of the webhook's Service, Secret and rules ConfigMap")
	fs.StringVar(&f.ServiceName, "service-name", "karpx-webhook", "Name of the webhook Service (the certificate's DNS name)")
	fs.StringVar(&f.SecretName, "secret-name", "karpx-webhook-cert", "Name of the Secret holding the CA and serving certificate")
	fs.StringVar(&f.MutatingName, "mutating-webhook-configuration", "karpx-webhook", "MutatingWebhookConfiguration whose caBundle is kept up to date (self mode)")
	fs.StringVar(&f.ValidatingName, "validating-webhook-configuration", "karpx-webhook", "ValidatingWebhookConfiguration whose caBundle is kept up to date (self mode)")
	fs.StringVar(&f.TaintRules, "startup-taint-rules-configmap", "karpx-webhook-startup-taints", "ConfigMap (in --namespace) of extra startup-taint rules; empty for built-in rules only")
	fs.StringVar(&f.StartupTaintNamespaces, "startup-taint-namespaces", strings.Join(DefaultStartupTaintNamespaces, ","), "Comma-separated namespaces whose DaemonSets enable startup-taint rules (an agent's DaemonSet elsewhere, e.g. a tenant's, changes nothing)")
	fs.StringVar(&f.DisableRules, "disable-rules", "", "Comma-separated lint rule IDs the validating webhook skips, e.g. KX101,KX102")
	fs.StringVar(&f.UninspectableCommands, "uninspectable-commands", "deny", kxlint.UnresolvedFlagUsage)
	fs.StringVar(&f.MetricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it")
	fs.BoolVar(&f.MetricsSecure, "metrics-secure", true, "Serve metrics over HTTPS to authenticated, authorised clients only (TokenReview and SubjectAccessReview: RBAC get on /metrics, e.g. ClusterRole karpx-metrics-reader); false serves plain HTTP to anyone")
	fs.StringVar(&f.ProbeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints")
	fs.StringVar(&f.PprofAddr, "pprof-bind-address", "", "Address of the net/http/pprof endpoints (/debug/pprof/); empty disables them")
	fs.BoolVar(&f.EnableHTTP2, "enable-http2", false, "Serve HTTP/2 (off by default: CVE-2023-44487)")
	fs.DurationVar(&f.ShutdownDelay, "shutdown-delay", DefaultShutdownDelay, "How long to keep serving after SIGTERM, closing keep-alive connections, before stopping")
}
