package webhook

import (
	"context"
	"crypto/tls"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	kxlint "github.com/karpx/karpx/lint"
)

// HTTP paths of the handlers; the webhook configurations under
// manifests/webhook point at them.
const (
	// MutateNodePoolPath serves NodePoolDefaulter.
	MutateNodePoolPath = "/mutate-karpenter-sh-v1-nodepool"
	// ValidateNodePoolPath serves Validator for NodePools.
	ValidateNodePoolPath = "/validate-karpenter-sh-v1-nodepool"
	// ValidateEC2NodeClassPath serves Validator for EC2NodeClasses.
	ValidateEC2NodeClassPath = "/validate-karpenter-k8s-aws-v1-ec2nodeclass"
	// ValidateNodeOverlayPath serves Validator for NodeOverlays
	// (karpenter.sh/v1alpha1), checked against KX203 (no kind denied
	// today).
	ValidateNodeOverlayPath = "/validate-karpenter-sh-v1alpha1-nodeoverlay"
)

// Options configure the handlers.
type Options struct {
	// TaintRulesConfigMap is the ConfigMap of extra startup-taint rules
	// (see TaintRulesConfigKey); empty Name means built-in rules only.
	TaintRulesConfigMap types.NamespacedName
	// StartupTaintNamespaces are the namespaces whose DaemonSets startup-taint
	// detection reads (ClusterTaintProvider.Namespaces); nil means
	// DefaultStartupTaintNamespaces. The DaemonSet informer watches these
	// namespaces only (CacheOptions), so the webhook needs no cluster-wide
	// DaemonSet access.
	StartupTaintNamespaces []string
	// DisabledRules lists lint rule IDs the validating webhook skips.
	DisabledRules map[string]bool
	// LookupTimeout bounds the EC2NodeClass lookup; 0 means
	// DefaultLookupTimeout.
	LookupTimeout time.Duration
	// UnresolvedSeverity is the severity of a KX009 finding about a
	// command karpx cannot determine (lint.Finding.Unresolved):
	// lint.SeverityDeny when empty, or lint.SeverityWarning.
	UnresolvedSeverity kxlint.Severity
}

// Register adds the four handlers to srv, each recovering from panics
// (answerRecovering). reader is normally the
// manager's cache (mgr.GetCache()), configured with CacheOptions; it reads
// DaemonSet and EC2NodeClass metadata and the rules ConfigMap.
func Register(srv crwebhook.Server, reader client.Reader, o Options) {
	srv.Register(MutateNodePoolPath, &admission.Webhook{Handler: &recoveringHandler{name: HandlerMutateNodePool, h: &NodePoolDefaulter{
		Taints: &ClusterTaintProvider{Reader: reader, ConfigMap: o.TaintRulesConfigMap, Namespaces: o.StartupTaintNamespaces},
	}}})
	v := &Validator{Reader: reader, LookupTimeout: o.LookupTimeout, Disabled: o.DisabledRules, Unresolved: o.UnresolvedSeverity}
	srv.Register(ValidateNodePoolPath, &objectHandler[karpv1.NodePool]{name: HandlerValidateNodePool, admit: v.admitNodePool})
	srv.Register(ValidateEC2NodeClassPath, &objectHandler[ec2NodeClassUserData]{name: HandlerValidateEC2NodeClass, admit: v.admitEC2NodeClass})
	srv.Register(ValidateNodeOverlayPath, &objectHandler[nodeOverlayObject]{name: HandlerValidateNodeOverlay, admit: v.admitNodeOverlay})
}

// CacheOptions returns the manager cache options for the webhook: the
// DaemonSet informer watches only the startup-taint namespaces
// (StartupTaintNamespaces), and the ConfigMap informer only the rules
// ConfigMap (by namespace and name), so the webhook never caches other
// DaemonSets or ConfigMaps. DaemonSets and EC2NodeClasses are read as
// metadata only, whatever these options say.
func CacheOptions(o Options) cache.Options {
	namespaces := o.StartupTaintNamespaces
	if namespaces == nil {
		namespaces = DefaultStartupTaintNamespaces
	}
	daemonSets := cache.ByObject{Namespaces: map[string]cache.Config{}}
	for _, ns := range namespaces {
		daemonSets.Namespaces[ns] = cache.Config{}
	}
	byObject := map[client.Object]cache.ByObject{}
	if len(namespaces) > 0 {
		// No namespace: detection is off and no DaemonSet informer starts
		// (an empty Namespaces map would mean every namespace).
		byObject[&appsv1.DaemonSet{}] = daemonSets
	}
	if o.TaintRulesConfigMap.Name != "" {
		byObject[&corev1.ConfigMap{}] = cache.ByObject{
			Namespaces: map[string]cache.Config{o.TaintRulesConfigMap.Namespace: {}},
			Field:      fields.OneTermEqualSelector("metadata.name", o.TaintRulesConfigMap.Name),
		}
	}
	return cache.Options{ByObject: byObject}
}

// ServerOptions configure NewServer.
type ServerOptions struct {
	// Host is the address to listen on; empty means all interfaces.
	Host string
	// Port is the TCP port; 0 means controller-runtime's default, 9443.
	Port int
	// CertDir holds tls.crt and tls.key; the server reloads them when they
	// change (controller-runtime's certwatcher).
	CertDir string
	// EnableHTTP2 serves HTTP/2 as well as HTTP/1.1. Off by default because
	// of the HTTP/2 rapid-reset and stream-cancellation attacks
	// (CVE-2023-44487, CVE-2023-39325); the API server talks HTTP/1.1 or 2.
	EnableHTTP2 bool
}

// NewServer returns a controller-runtime webhook server that requires TLS
// 1.2 or later.
func NewServer(o ServerOptions) crwebhook.Server {
	return crwebhook.NewServer(crwebhook.Options{
		Host:    o.Host,
		Port:    o.Port,
		CertDir: o.CertDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.MinVersion = tls.VersionTLS12
			if !o.EnableHTTP2 {
				c.NextProtos = []string{"http/1.1"}
			}
		}},
	})
}

// WarmUp returns a manager runnable that starts the informers the handlers
// use (DaemonSet and EC2NodeClass metadata, the rules ConfigMap) as soon as
// the manager's cache runs, so that the first admission request does not
// wait for an informer to sync. Failures are logged, never fatal: a handler
// that cannot read the cache fails open (mutation) or skips the lookup
// (validation).
func WarmUp(reader client.Reader, o Options) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		log := logf.FromContext(ctx).WithName("warmup")
		p := &ClusterTaintProvider{Reader: reader, ConfigMap: o.TaintRulesConfigMap, Namespaces: o.StartupTaintNamespaces}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if taints, err := p.ActiveTaints(wctx); err != nil {
			log.Error(err, "warming up startup-taint detection")
		} else {
			log.Info("startup-taint detection ready", "activeTaints", len(taints))
		}
		v := &Validator{Reader: reader, LookupTimeout: time.Minute}
		if _, err := v.lookup(log)(wctx, "karpx-warmup"); err != nil {
			log.Error(err, "warming up EC2NodeClass lookup (is the EC2NodeClass CRD installed?)")
		}
		return nil
	})
}
