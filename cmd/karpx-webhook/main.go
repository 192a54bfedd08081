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
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	apisv1 "github.com/karpx/karpx/apis/v1"
	kxlint "github.com/karpx/karpx/lint"
	"github.com/karpx/karpx/webhook"
)

func main() {
	var f webhook.CommandFlags
	fs := flag.CommandLine
	f.AddFlags(fs)
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

// options checks --cert-mode, --disable-rules, --startup-taint-namespaces
// and --uninspectable-commands and returns the webhook's
// options; errors name the flag.
func options(f webhook.CommandFlags) (webhook.Options, error) {
	if f.CertMode != webhook.CertModeSelf && f.CertMode != webhook.CertModeCertManager {
		return webhook.Options{}, fmt.Errorf("--cert-mode %q: want %s or %s", f.CertMode, webhook.CertModeSelf, webhook.CertModeCertManager)
	}
	disabled := map[string]bool{}
	for _, id := range strings.Split(f.DisableRules, ",") {
		if id = strings.ToUpper(strings.TrimSpace(id)); id == "" {
			continue
		}
		if _, ok := kxlint.RuleByID(id); !ok {
			return webhook.Options{}, fmt.Errorf("--disable-rules: unknown rule %q", id)
		}
		disabled[id] = true
	}
	namespaces := []string{}
	for _, ns := range strings.Split(f.StartupTaintNamespaces, ",") {
		if ns = strings.TrimSpace(ns); ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return webhook.Options{}, fmt.Errorf("--startup-taint-namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		namespaces = append(namespaces, ns)
	}
	unresolved, err := kxlint.ParseUnresolvedSeverity(f.UninspectableCommands)
	if err != nil {
		return webhook.Options{}, err
	}
	opts := webhook.Options{DisabledRules: disabled, StartupTaintNamespaces: namespaces, UnresolvedSeverity: unresolved}
	if f.TaintRules != "" {
		opts.TaintRulesConfigMap = types.NamespacedName{Namespace: f.Namespace, Name: f.TaintRules}
	}
	return opts, nil
}

func run(f webhook.CommandFlags, log logr.Logger) error {
	opts, err := options(f)
	if err != nil {
		return err
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
		Metrics:                metricsOptions(f),
		HealthProbeBindAddress: f.ProbeAddr,
		PprofBindAddress:       f.PprofAddr,
		Cache:                  webhook.CacheOptions(opts),
		LeaderElection:         false, // every replica serves; nothing to elect
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	drain := &webhook.Drain{}
	srv := webhook.NewServer(webhook.ServerOptions{Port: f.Port, CertDir: f.CertDir, EnableHTTP2: f.EnableHTTP2})
	// Each request is bounded (read and write deadlines, an in-flight
	// limit) and answers "Connection: close" while the replica drains.
	webhook.Register(webhook.RequestLimits{}.Server(drain.Server(srv)), mgr.GetCache(), opts)

	certsReady, err := certificates(mgr, f)
	if err != nil {
		return err
	}
	// The server reads its certificate when it starts, so it is added to
	// the manager only once the certificate is in place.
	go func() {
		<-certsReady
		log.Info("certificates ready; starting webhook server", "port", f.Port, "certMode", f.CertMode)
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
		if err := drain.ReadyzCheck(req); err != nil {
			return err
		}
		select {
		case <-certsReady:
			return started(req)
		default:
			return errors.New("certificates not ready")
		}
	}); err != nil {
		return err
	}
	log.Info("starting karpx-webhook", "namespace", f.Namespace, "certMode", f.CertMode, "disabledRules", f.DisableRules)
	return mgr.Start(drain.SignalContext(f.ShutdownDelay, log))
}

// metricsOptions returns the metrics server's options: plain HTTP, or with
// --metrics-secure HTTPS (a self-signed certificate) behind
// controller-runtime's authentication and authorization filter
// (TokenReview, then SubjectAccessReview of the path and verb).
func metricsOptions(f webhook.CommandFlags) metricsserver.Options {
	o := metricsserver.Options{BindAddress: f.MetricsAddr}
	if f.MetricsSecure {
		o.SecureServing, o.FilterProvider = true, filters.WithAuthenticationAndAuthorization
	}
	return o
}

// certificates returns a channel closed once the serving certificate is in
// place: at once with cert-manager, else when the rotator added to mgr has
// written it.
func certificates(mgr ctrl.Manager, f webhook.CommandFlags) (chan struct{}, error) {
	certsReady := make(chan struct{})
	if f.CertMode != webhook.CertModeSelf {
		close(certsReady)
		return certsReady, nil
	}
	err := webhook.AddCertRotator(mgr, webhook.CertOptions{
		Secret:                         types.NamespacedName{Namespace: f.Namespace, Name: f.SecretName},
		CertDir:                        f.CertDir,
		ServiceName:                    f.ServiceName,
		MutatingWebhookConfiguration:   f.MutatingName,
		ValidatingWebhookConfiguration: f.ValidatingName,
	}, certsReady)
	if err != nil {
		return nil, fmt.Errorf("setting up certificate rotation: %w", err)
	}
	return certsReady, nil
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
