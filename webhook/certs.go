package webhook

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Certificate management modes.
const (
	// CertModeSelf makes the webhook generate and rotate its own CA and
	// serving certificate (CertRotator), store them in one named Secret,
	// and inject the CA into the webhook configurations' caBundle. No
	// manual step and no extra component.
	CertModeSelf = "self"
	// CertModeCertManager serves whatever is mounted in the certificate
	// directory; cert-manager issues it from a CA Issuer and its CA
	// injector fills caBundle (charts/karpx/templates/webhook/cert-manager).
	CertModeCertManager = "cert-manager"
)

// Defaults for self-managed certificates. The rotator renews a certificate
// CertLookahead before it expires and checks at least every
// RotationCheckFrequency (besides on every change of its Secret or webhook
// configurations). The figures are karpx's choice: a CA that outlives many
// serving certificates, renewed a quarter ahead.
const (
	CACertValidity         = 10 * 365 * 24 * time.Hour
	ServerCertValidity     = 365 * 24 * time.Hour
	CertLookahead          = 90 * 24 * time.Hour
	RotationCheckFrequency = 12 * time.Hour
)

// CertOptions configure self-managed certificates.
type CertOptions struct {
	// Secret holds the CA and serving certificate; it must exist (the
	// chart creates it empty) and be mounted at CertDir in every replica,
	// so that all replicas serve the same pair. The rotator reads and
	// writes this Secret only, by name.
	Secret types.NamespacedName
	// CertDir is where the webhook server reads tls.crt and tls.key.
	CertDir string
	// ServiceName is the webhook Service; the certificate is valid for
	// ServiceName.Namespace.svc (and .svc.cluster.local).
	ServiceName string
	// MutatingWebhookConfiguration names the mutating configuration whose
	// caBundle the rotator keeps up to date; empty for none.
	MutatingWebhookConfiguration string
	// ValidatingWebhookConfiguration is the same for the validating one.
	ValidatingWebhookConfiguration string
	// ExtraDNSNames are further DNS names the serving certificate is valid
	// for, e.g. "localhost" for a webhook configuration that reaches the
	// server by URL (tests); nil for the Service names only.
	ExtraDNSNames []string
	// ControllerName names the rotator in its logs; empty means
	// "cert-rotator-" and the Secret's name.
	ControllerName string
	// Clock times the periodic check and the certificates' validity;
	// nil is clock.RealClock.
	Clock clock.WithTicker
}

// dnsNames returns the names the serving certificate must be valid for: the
// Service's in-cluster names, then ExtraDNSNames.
func (o CertOptions) dnsNames() []string {
	svc := o.ServiceName + "." + o.Secret.Namespace
	return append([]string{svc + ".svc", svc + ".svc.cluster.local", svc}, o.ExtraDNSNames...)
}

// CertRotator keeps one Secret filled with a valid CA and serving
// certificate and the webhook configurations' caBundle equal to that CA.
// It reads nothing else: the Secret and each configuration are read with a
// get by name and followed with a watch whose field selector is
// metadata.name, which RBAC authorises through resourceNames; writes are
// updates (optimistic concurrency), so its Role needs get, watch and update
// on those names only, and no list of Secrets.
//
// Every replica runs it (no leader election): when two replicas renew at
// once, one update wins with a conflict for the other, which then reads the
// winner's pair.
type CertRotator struct {
	opts  CertOptions
	c     client.WithWatch
	clock clock.WithTicker
	log   logr.Logger
	ready chan struct{}
	// kick wakes the reconcile loop (buffer 1: a pending wake-up is enough).
	kick chan struct{}
}

// NewCertRotator returns a rotator for o that talks to the API server
// through c; ready is closed once the Secret holds a valid pair, every
// named configuration carries its CA, and CertDir holds tls.crt (the
// Secret is mounted). It returns an error naming the missing option.
func NewCertRotator(c client.WithWatch, o CertOptions, ready chan struct{}, log logr.Logger) (*CertRotator, error) {
	if o.Secret.Namespace == "" || o.Secret.Name == "" || o.ServiceName == "" {
		return nil, fmt.Errorf("self-managed certificates need a Secret namespace/name (--namespace, --secret-name) and a Service name (--service-name)")
	}
	if o.CertDir == "" {
		return nil, fmt.Errorf("self-managed certificates need a certificate directory (--cert-dir)")
	}
	if o.ControllerName == "" {
		o.ControllerName = "cert-rotator-" + o.Secret.Name
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &CertRotator{opts: o, c: c, clock: o.Clock, log: log.WithName(o.ControllerName), ready: ready, kick: make(chan struct{}, 1)}, nil
}

// AddCertRotator adds a CertRotator for o to mgr, on a client of its own
// (no cache: nothing is listed). ready is closed when the certificate is in
// place (see NewCertRotator); start the webhook server only then. It returns
// the error of a missing option or of building the client.
func AddCertRotator(mgr manager.Manager, o CertOptions, ready chan struct{}) error {
	c, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("certificate rotator client: %w", err)
	}
	r, err := NewCertRotator(c, o, ready, mgr.GetLogger())
	if err != nil {
		return err
	}
	return mgr.Add(r)
}

// NeedLeaderElection is false: every replica keeps its mounted Secret
// valid.
func (r *CertRotator) NeedLeaderElection() bool { return false }

// Start reconciles until ctx ends: at start, on every watch event of the
// Secret or a named configuration, every RotationCheckFrequency, and after
// a failure with a backoff of 1 s doubling to 1 min. It returns nil when
// ctx ends.
func (r *CertRotator) Start(ctx context.Context) error {
	r.trigger()
	go r.follow(ctx, "Secret "+r.opts.Secret.String(), &corev1.SecretList{}, client.InNamespace(r.opts.Secret.Namespace), client.MatchingFields{"metadata.name": r.opts.Secret.Name})
	if n := r.opts.MutatingWebhookConfiguration; n != "" {
		go r.follow(ctx, "MutatingWebhookConfiguration "+n, &admissionregistrationv1.MutatingWebhookConfigurationList{}, client.MatchingFields{"metadata.name": n})
	}
	if n := r.opts.ValidatingWebhookConfiguration; n != "" {
		go r.follow(ctx, "ValidatingWebhookConfiguration "+n, &admissionregistrationv1.ValidatingWebhookConfigurationList{}, client.MatchingFields{"metadata.name": n})
	}
	check := r.clock.NewTicker(RotationCheckFrequency)
	defer check.Stop()
	backoff := time.Duration(0)
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.kick:
		case <-check.C():
		case <-retry:
		}
		retry = nil
		if err := r.reconcile(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			backoff = min(max(2*backoff, time.Second), time.Minute)
			r.log.Error(err, "certificate reconcile failed; retrying", "retryIn", backoff)
			retry = r.clock.After(backoff)
			continue
		}
		backoff = 0
		if !r.isReady() {
			// Waiting for kubelet to project the Secret into CertDir.
			retry = r.clock.After(time.Second)
		}
	}
}

// trigger wakes the reconcile loop.
func (r *CertRotator) trigger() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// follow watches the one object that opts select (a field selector on
// metadata.name) and triggers a reconcile on every event, re-opening the
// watch after it ends (1 s later, 30 s after a failed open) until ctx ends.
func (r *CertRotator) follow(ctx context.Context, what string, list client.ObjectList, opts ...client.ListOption) {
	for ctx.Err() == nil {
		w, err := r.c.Watch(ctx, list, opts...)
		wait := time.Second
		if err != nil {
			r.log.Error(err, "watch failed; reopening", "object", what)
			wait = 30 * time.Second
		} else {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					break
				}
				r.trigger()
			}
			w.Stop()
		}
		select {
		case <-ctx.Done():
		case <-r.clock.After(wait):
		}
	}
}

// isReady reports whether ready is closed, closing it when the Secret's
// certificate is mounted in CertDir.
func (r *CertRotator) isReady() bool {
	select {
	case <-r.ready:
		return true
	default:
	}
	if _, err := os.Stat(filepath.Join(r.opts.CertDir, corev1.TLSCertKey)); err != nil {
		return false
	}
	r.log.Info("certificate in place", "certDir", r.opts.CertDir)
	close(r.ready)
	return true
}

// reconcile renews the Secret's pair if planCertificates says so and puts
// its CA into every named configuration. It returns the API error, or an
// error naming the Secret when it does not exist.
func (r *CertRotator) reconcile(ctx context.Context) error {
	secret := &corev1.Secret{}
	if err := r.c.Get(ctx, r.opts.Secret, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("certificate Secret %s does not exist: create it empty (the chart's webhook config.yaml does); the webhook may not create Secrets", r.opts.Secret)
		}
		return err
	}
	data, why, err := planCertificates(secret.Data, r.opts.dnsNames(), r.clock.Now())
	if err != nil {
		return err
	}
	if why != "" {
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		for k, v := range data {
			secret.Data[k] = v
		}
		if err := r.c.Update(ctx, secret); err != nil {
			return fmt.Errorf("writing the renewed certificate to Secret %s: %w", r.opts.Secret, err)
		}
		r.log.Info("certificate renewed", "secret", r.opts.Secret.String(), "reason", why)
	}
	ca := secret.Data[SecretCAKey]
	if n := r.opts.MutatingWebhookConfiguration; n != "" {
		if err := r.inject(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{}, n, ca); err != nil {
			return err
		}
	}
	if n := r.opts.ValidatingWebhookConfiguration; n != "" {
		if err := r.inject(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{}, n, ca); err != nil {
			return err
		}
	}
	return nil
}

// inject sets every webhook's caBundle in configuration name (obj is a
// Mutating- or ValidatingWebhookConfiguration) to ca, updating it only when
// one differs. It returns the API error naming the configuration.
func (r *CertRotator) inject(ctx context.Context, obj client.Object, name string, ca []byte) error {
	if err := r.c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		return fmt.Errorf("reading %T %s for its caBundle: %w", obj, name, err)
	}
	var bundles []*[]byte
	switch o := obj.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range o.Webhooks {
			bundles = append(bundles, &o.Webhooks[i].ClientConfig.CABundle)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range o.Webhooks {
			bundles = append(bundles, &o.Webhooks[i].ClientConfig.CABundle)
		}
	}
	if !slices.ContainsFunc(bundles, func(b *[]byte) bool { return !bytes.Equal(*b, ca) }) {
		return nil
	}
	for _, b := range bundles {
		*b = slices.Clone(ca)
	}
	if err := r.c.Update(ctx, obj); err != nil {
		return fmt.Errorf("injecting the CA into %T %s: %w", obj, name, err)
	}
	r.log.Info("caBundle injected", "configuration", name)
	return nil
}
