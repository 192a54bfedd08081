package clusterinfo

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Info is what Discover found; an empty field was not discovered.
type Info struct {
	// CABundle is the API server's CA, base64-encoded PEM.
	CABundle string
	// KubernetesVersion is the API server's MAJOR.MINOR, e.g. "1.35".
	KubernetesVersion string
	// ServiceCIDR is the service IPv4 CIDR, e.g. "10.100.0.0/16".
	ServiceCIDR string
}

// eksServiceCIDRs are the service CIDRs EKS chooses when none is given.
// Source: Amazon EKS User Guide, "serviceIpv4Cidr" of CreateCluster.
var eksServiceCIDRs = []string{"10.100.0.0/16", "172.20.0.0/16"}

// RetryCap is the longest wait between two reads of a setting while the
// API server answers with a transient error (Transient): the waits double
// from 250 ms up to it, until the read succeeds or ctx is done.
const RetryCap = 5 * time.Second

// Discover reads Info through cfg. Each field is discovered on its own; a
// read the API server answers with a transient error (it is restarting,
// overloaded, unreachable: Transient) is retried until it is answered or
// ctx is done, because a setting defaulted on a blip would differ from the
// one every other controller process wrote into its launch templates (a
// different template, a different CreateFleet ClientToken, a second
// instance for a NodeClaim after a restart). The returned error joins the
// failures (fields that failed stay empty), so the caller can fall back
// field by field; errors.Is(err, ErrNoAnswer) when ctx ended before the
// API server gave a definite answer for one of them.
func Discover(ctx context.Context, cfg *rest.Config) (Info, error) {
	var info Info
	var errs []error
	switch {
	case len(cfg.CAData) > 0:
		info.CABundle = base64.StdEncoding.EncodeToString(cfg.CAData)
	case cfg.CAFile != "":
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("CA bundle: %w", err))
		} else {
			info.CABundle = base64.StdEncoding.EncodeToString(b)
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return info, fmt.Errorf("discovering cluster settings: %w", err)
	}
	version, cidr, err := discover(ctx, cs, RetryCap)
	info.KubernetesVersion, info.ServiceCIDR = version, cidr
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return info, fmt.Errorf("discovering cluster settings: %w", errors.Join(errs...))
	}
	return info, nil
}

// discover reads the Kubernetes version and the service CIDR through cs,
// retrying transient answers with waits doubling from 250 ms up to
// retryCap.
func discover(ctx context.Context, cs kubernetes.Interface, retryCap time.Duration) (version, cidr string, err error) {
	var errs []error
	if err := retryTransient(ctx, retryCap, "Kubernetes version", func() error {
		v, err := cs.Discovery().ServerVersion()
		if err == nil {
			version = strings.TrimPrefix(v.Major, "v") + "." + strings.TrimSuffix(v.Minor, "+")
		}
		return err
	}); err != nil {
		errs = append(errs, fmt.Errorf("Kubernetes version: %w", err))
	}
	if c, err := serviceCIDR(ctx, cs, retryCap); err != nil {
		errs = append(errs, fmt.Errorf("service CIDR: %w", err))
	} else {
		cidr = c
	}
	return version, cidr, errors.Join(errs...)
}

// ErrNoAnswer is wrapped by Discover's error when ctx ended while the API
// server still answered a read transiently: the setting is unknown, not
// absent, and a default would be a guess.
var ErrNoAnswer = errors.New("the API server gave no definite answer in time")

// transient reports whether err, the error of one API read, says nothing
// about the setting: the API server was unreachable, restarting,
// overloaded or failed (every error but a definite API answer: NotFound,
// Forbidden, Unauthorized, BadRequest, MethodNotSupported, NotAcceptable,
// UnsupportedMediaType, Invalid).
func transient(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // a transport error: refused, reset, EOF, timeout
	}
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err), apierrors.IsUnauthorized(err),
		apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err),
		apierrors.IsUnsupportedMediaType(err), apierrors.IsInvalid(err):
		return false
	}
	return true
}

// retryTransient calls read until it returns nil or an error that is not
// Transient, waiting between calls (doubling from 250 ms, or retryCap if
// smaller, up to retryCap; 10% jitter), each retry logged through ctx's
// logger with what. It returns read's last error; when ctx ends first,
// that error wrapped with ErrNoAnswer and ctx's error.
func retryTransient(ctx context.Context, retryCap time.Duration, what string, read func() error) error {
	delay := min(250*time.Millisecond, retryCap)
	for {
		err := read()
		if err == nil || !transient(err) {
			return err
		}
		logr.FromContextOrDiscard(ctx).Info("API server did not answer; asking again rather than falling back to a default",
			"setting", what, "retryIn", delay.String(), "error", err.Error())
		timer := time.NewTimer(wait.Jitter(delay, 0.1))
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w (%w): %w", ErrNoAnswer, ctx.Err(), err)
		case <-timer.C:
		}
		delay = min(2*delay, retryCap)
	}
}

// serviceCIDR returns the first IPv4 CIDR of the "kubernetes" ServiceCIDR,
// else (no such object or API, or no right to read it) the EKS default
// CIDR that holds the "kubernetes" Service's IP. Transient answers are
// retried (retryTransient): falling back on one would answer from the
// Service what the ServiceCIDR says otherwise.
func serviceCIDR(ctx context.Context, cs kubernetes.Interface, retryCap time.Duration) (string, error) {
	var sc *networkingv1.ServiceCIDR
	err := retryTransient(ctx, retryCap, "ServiceCIDR kubernetes", func() (err error) {
		sc, err = cs.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
		return err
	})
	if err == nil {
		if cidr := firstIPv4(sc); cidr != "" {
			return cidr, nil
		}
	} else if errors.Is(err, ErrNoAnswer) {
		return "", err
	}
	var svc *corev1.Service
	if err := retryTransient(ctx, retryCap, "Service default/kubernetes", func() (err error) {
		svc, err = cs.CoreV1().Services(corev1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		return err
	}); err != nil {
		return "", err
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return "", fmt.Errorf("service default/kubernetes has cluster IP %q: %w", svc.Spec.ClusterIP, err)
	}
	for _, c := range eksServiceCIDRs {
		if netip.MustParsePrefix(c).Contains(ip) {
			return c, nil
		}
	}
	return "", fmt.Errorf("cluster IP %s of service default/kubernetes is in neither EKS default (%s); set --cluster-cidr", ip, strings.Join(eksServiceCIDRs, ", "))
}

func firstIPv4(sc *networkingv1.ServiceCIDR) string {
	for _, c := range sc.Spec.CIDRs {
		if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() {
			return c
		}
	}
	return ""
}
