// Command karpx-webhook serves karpx's admission webhook for Karpenter
// NodePools and EC2NodeClasses (package github.com/karpx/karpx/webhook):
// startup taints injected into NodePools, unsafe userData rejected.
//
// It runs on its own, next to karpx's autoscaler or upstream Karpenter.
// manifests/webhook deploys it with two replicas, a PodDisruptionBudget and
// self-managed certificates; see the flags for the cert-manager option.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	apisv1 "github.com/karpx/karpx/apis/v1"
	kxlint "github.com/karpx/karpx/lint"
	"github.com/karpx/karpx/webhook"
)

type flags struct {
	port           int
	certDir        string
	certMode       string
	namespace      string
	serviceName    string
	secretName     string
	mutatingName   string
	validatingName string
	taintRules     string
	disableRules   string
	metricsAddr    string
	probeAddr      string
	pprofAddr      string
	enableHTTP2    bool
}

func main() {
	var f flags
	fs := flag.CommandLine
	fs.IntVar(&f.port, "port", 9443, "HTTPS port of the webhook server")
	fs.StringVar(&f.certDir, "cert-dir", "/certs", "Directory holding tls.crt and tls.key (the mounted certificate Secret)")
	fs.StringVar(&f.certMode, "cert-mode", webhook.CertModeSelf, "Certificate management: self (cert-controller rotation) or cert-manager")
	fs.StringVar(&f.namespace, "namespace", envOr("POD_NAMESPACE", "karpx-system"), "Namespace of the webhook's Service, Secret and rules ConfigMap")
	fs.StringVar(&f.serviceName, "service-name", "karpx-webhook", "Name of the webhook Service (the certificate's DNS name)")
	fs.StringVar(&f.secretName, "secret-name", "karpx-webhook-cert", "Name of the Secret holding the CA and serving certificate")
	fs.StringVar(&f.mutatingName, "mutating-webhook-configuration", "karpx-webhook", "MutatingWebhookConfiguration whose caBundle is kept up to date (self mode)")
	fs.StringVar(&f.validatingName, "validating-webhook-configuration", "karpx-webhook", "ValidatingWebhookConfiguration whose caBundle is kept up to date (self mode)")
	fs.StringVar(&f.taintRules, "startup-taint-rules-configmap", "karpx-webhook-startup-taints", "ConfigMap (in --namespace) of extra startup-taint rules; empty for built-in rules only")
	fs.StringVar(&f.disableRules, "disable-rules", "", "Comma-separated lint rule IDs the validating webhook skips, e.g. KX101,KX102")
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints")
	fs.StringVar(&f.pprofAddr, "pprof-bind-address", "", "Address of the net/http/pprof endpoints (/debug/pprof/); empty disables them")
	fs.BoolVar(&f.enableHTTP2, "enable-http2", false, "Serve HTTP/2 (off by default: CVE-2023-44487)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	flag.Parse()
	setGCPercent()

	log := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(log)
	if err := run(f, log); err != nil {
		log.Error(err, "karpx-webhook stopped")
		os.Exit(1)
	}
}

func run(f flags, log logr.Logger) error {
	if f.certMode != webhook.CertModeSelf && f.certMode != webhook.CertModeCertManager {
		return fmt.Errorf("--cert-mode %q: want %s or %s", f.certMode, webhook.CertModeSelf, webhook.CertModeCertManager)
	}
	disabled := map[string]bool{}
	for _, id := range strings.Split(f.disableRules, ",") {
		if id = strings.ToUpper(strings.TrimSpace(id)); id == "" {
			continue
		}
		if _, ok := kxlint.RuleByID(id); !ok {
			return fmt.Errorf("--disable-rules: unknown rule %q", id)
		}
		disabled[id] = true
	}
	opts := webhook.Options{DisabledRules: disabled}
	if f.taintRules != "" {
		opts.TaintRulesConfigMap = types.NamespacedName{Namespace: f.namespace, Name: f.taintRules}
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("no Kubernetes configuration (set --kubeconfig or run in a cluster): %w", err)
	}
	scheme := clientgoscheme.Scheme
	if err := apisv1.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress: f.probeAddr,
		PprofBindAddress:       f.pprofAddr,
		Cache:                  webhook.CacheOptions(opts),
		LeaderElection:         false, // every replica serves; nothing to elect
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	srv := webhook.NewServer(webhook.ServerOptions{Port: f.port, CertDir: f.certDir, EnableHTTP2: f.enableHTTP2})
	webhook.Register(srv, mgr.GetCache(), opts)

	certsReady := make(chan struct{})
	if f.certMode == webhook.CertModeSelf {
		err := webhook.AddCertRotator(mgr, webhook.CertOptions{
			Secret:                         types.NamespacedName{Namespace: f.namespace, Name: f.secretName},
			CertDir:                        f.certDir,
			ServiceName:                    f.serviceName,
			MutatingWebhookConfiguration:   f.mutatingName,
			ValidatingWebhookConfiguration: f.validatingName,
		}, certsReady)
		if err != nil {
			return fmt.Errorf("setting up certificate rotation: %w", err)
		}
	} else {
		close(certsReady)
	}
	// The server reads its certificate when it starts, so it is added to
	// the manager only once the certificate is in place.
	go func() {
		<-certsReady
		log.Info("certificates ready; starting webhook server", "port", f.port, "certMode", f.certMode)
		if err := mgr.Add(srv); err != nil {
			log.Error(err, "adding webhook server")
			os.Exit(1)
		}
	}()
	if err := mgr.Add(webhook.WarmUp(mgr.GetCache(), opts)); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	started := srv.StartedChecker()
	if err := mgr.AddReadyzCheck("webhook", func(req *http.Request) error {
		select {
		case <-certsReady:
			return started(req)
		default:
			return errors.New("certificates not ready")
		}
	}); err != nil {
		return err
	}
	log.Info("starting karpx-webhook", "namespace", f.namespace, "certMode", f.certMode, "disabledRules", f.disableRules)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// defaultGCPercent is the GOGC the webhook runs with when the GOGC
// environment variable is unset. An admission review allocates about
// 25 KB on a live heap of a few MiB, so Go's default of 100 starts a
// collection every few hundred reviews; at 2,000 reviews per second the
// marking and its assists showed up in the p99 latency. 400 collects a
// quarter as often for a peak heap of tens of MiB, well inside the 256 MiB
// limit of manifests/webhook, which also sets GOMEMLIMIT as the ceiling.
const defaultGCPercent = 400

func setGCPercent() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
