package clusterinfo

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
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
	"k8s.io/utils/clock"
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

// retry says how a setting is read again while the API server answers
// without telling it.
type retry struct {
	// Cap is the longest wait between two reads: the waits double from
	// 250 ms (or Cap, if smaller) up to it.
	Cap time.Duration
	// AuthGrace is how long, from the first read, Forbidden and
	// Unauthorized are taken for a server that has just started (its
	// RBAC authorizer and authenticators sync their caches after it
	// serves: the first requests after a restart are refused) rather
	// than for a definite answer.
	AuthGrace time.Duration
	// Clock times AuthGrace and the waits between reads.
	Clock clock.Clock
}

// defaultRetry is Discover's: waits up to 5 s apart, and 30 s for a
// restarted API server's authorizer to sync. In the chaos suite a
// controller started right after an API server restart got Forbidden for
// /version (client-go prints it as "unknown": the body was not text).
func defaultRetry(clk clock.Clock) retry {
	return retry{Cap: 5 * time.Second, AuthGrace: 30 * time.Second, Clock: clk}
}

// Discover reads Info through cfg. Each field is discovered on its own; a
// read the API server answers transiently (it is restarting, overloaded or
// unreachable, or refuses requests while its authorizer syncs after a
// start) is retried until it is answered or ctx is done, because a setting
// defaulted on a blip would differ from the one every other controller
// process wrote into its launch templates (a different template, a
// different CreateFleet ClientToken, a second instance for a NodeClaim
// after a restart). The returned error joins the failures (fields that
// failed stay empty), so the caller can fall back field by field;
// errors.Is(err, ErrNoAnswer) when ctx ended before the API server gave a
// definite answer for one of them. The waits and AuthGrace run on the
// wall clock; DiscoverWithClock takes another.
func Discover(ctx context.Context, cfg *rest.Config) (Info, error) {
	return DiscoverWithClock(ctx, cfg, clock.RealClock{})
}

// DiscoverWithClock is Discover with the waits between reads (250 ms
// doubling up to 5 s) and the 30 s grace for a restarted API server's
// refusals timed on clk.
func DiscoverWithClock(ctx context.Context, cfg *rest.Config, clk clock.Clock) (Info, error) {
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
	version, cidr, err := discover(ctx, cs, defaultRetry(clk))
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
// retrying transient answers as r says.
func discover(ctx context.Context, cs kubernetes.Interface, r retry) (version, cidr string, err error) {
	var errs []error
	if err := r.do(ctx, "Kubernetes version", func() error {
		v, err := cs.Discovery().ServerVersion()
		if err == nil {
			version = strings.TrimPrefix(v.Major, "v") + "." + strings.TrimSuffix(v.Minor, "+")
		}
		return err
	}); err != nil {
		errs = append(errs, fmt.Errorf("reading the Kubernetes version: %w", err))
	}
	if c, err := serviceCIDR(ctx, cs, r); err != nil {
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
// overloaded or failed, or (startingUp) refused a server that has just
// started. Definite answers are NotFound, BadRequest, MethodNotSupported,
// NotAcceptable, UnsupportedMediaType, Invalid, and Forbidden and
// Unauthorized once the server is no longer starting up.
func transient(err error, startingUp bool) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // a transport error: refused, reset, EOF, timeout
	}
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return startingUp
	case apierrors.IsNotFound(err), apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err),
		apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err), apierrors.IsInvalid(err):
		return false
	}
	return true
}

// do calls read until it returns nil or an error that is not transient,
// waiting on r.Clock between calls as r says (10% jitter; wait.Backoff's
// delays, which stay at Cap once there), each retry logged through ctx's
// logger with what. It returns read's last error; when ctx ends first,
// that error wrapped with ErrNoAnswer and ctx's error.
func (r retry) do(ctx context.Context, what string, read func() error) error {
	start := r.Clock.Now()
	backoff := wait.Backoff{Duration: min(250*time.Millisecond, r.Cap), Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: r.Cap}
	for {
		last := read()
		if last == nil || !transient(last, r.Clock.Since(start) < r.AuthGrace) {
			return last
		}
		logr.FromContextOrDiscard(ctx).Info("API server did not answer; asking again rather than falling back to a default",
			"setting", what, "error", last.Error())
		t := r.Clock.NewTimer(backoff.Step())
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C():
		}
		// The timer may win the select after ctx ended: check again.
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w (%w): %w", ErrNoAnswer, err, last)
		}
	}
}

// serviceCIDR returns the first IPv4 CIDR of the "kubernetes" ServiceCIDR,
// else (no such object or API, or no right to read it) the EKS default
// CIDR that holds the "kubernetes" Service's IP. Transient answers are
// retried (retry.do): falling back on one would answer from the
// Service what the ServiceCIDR says otherwise.
func serviceCIDR(ctx context.Context, cs kubernetes.Interface, r retry) (string, error) {
	var sc *networkingv1.ServiceCIDR
	err := r.do(ctx, "ServiceCIDR kubernetes", func() (err error) {
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
	if err := r.do(ctx, "Service default/kubernetes", func() (err error) {
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
