package clusterinfo

import (
	"context"
	"errors"
	"net"
	goruntime "runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func svc(ip string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: "default"}, Spec: corev1.ServiceSpec{ClusterIP: ip}}
}

func TestServiceCIDR(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objs    []runtime.Object
		want    string
		wantErr bool
	}{
		{"ServiceCIDR object", []runtime.Object{
			&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"fd00::/108", "10.96.0.0/12"}}},
			svc("10.96.0.1")}, "10.96.0.0/12", false},
		{"EKS default 10.100", []runtime.Object{svc("10.100.0.1")}, "10.100.0.0/16", false},
		{"EKS default 172.20", []runtime.Object{svc("172.20.0.1")}, "172.20.0.0/16", false},
		{"unknown range", []runtime.Object{svc("10.0.0.1")}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := serviceCIDR(context.Background(), fake.NewClientset(tc.objs...), steppedRetry(t, 0))
			if got != tc.want || (err != nil) != tc.wantErr || errors.Is(err, ErrNoAnswer) {
				t.Errorf("serviceCIDR = %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestTransientAnswers(t *testing.T) {
	gr := schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewServiceUnavailable("starting"), true},
		{apierrors.NewInternalError(errors.New("etcd")), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewTimeoutError("slow", 1), true},
		{apierrors.NewGenericServerResponse(502, "GET", gr, "kubernetes", "unknown", 0, true), true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}, true},
		{apierrors.NewNotFound(gr, "kubernetes"), false},
		{apierrors.NewMethodNotSupported(gr, "get"), false},
		{nil, false},
	} {
		for _, startingUp := range []bool{false, true} {
			if got := transient(tc.err, startingUp); got != tc.want {
				t.Errorf("transient(%v, starting up %v) = %v, want %v", tc.err, startingUp, got, tc.want)
			}
		}
	}
}

// Forbidden and Unauthorized are transient only while the server starts up
// (its authorizer syncing), definite after.
func TestRefusalsAreTransientWhileStartingUp(t *testing.T) {
	gr := schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}
	for _, err := range []error{apierrors.NewForbidden(gr, "kubernetes", errors.New("no RBAC")), apierrors.NewUnauthorized("token not known yet")} {
		if !transient(err, true) || transient(err, false) {
			t.Errorf("transient(%v): want true while starting up, false after", err)
		}
	}
}

// answerFirst makes cs answer the first n gets of resource with err.
func answerFirst(cs *fake.Clientset, resource string, n int, err error) *int {
	calls := 0
	cs.PrependReactor("get", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls <= n {
			return true, nil, err
		}
		return false, nil, nil
	})
	return &calls
}

func clusterWithServiceCIDR() *fake.Clientset {
	cs := fake.NewClientset(
		&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.0.0.0/24"}}},
		svc("10.100.0.1")) // a Service IP the ServiceCIDR contradicts
	cs.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: "1", Minor: "35+"}
	return cs
}

// An API server that answers 503 while it restarts is asked again: the
// settings are what it says once up, never the fallbacks (a Service's
// EKS default CIDR, the default version) a blip would give.
func TestDiscoverWaitsOutATransientAnswer(t *testing.T) {
	cs := clusterWithServiceCIDR()
	unavailable := apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
	versionCalls := answerFirst(cs, "version", 2, unavailable)
	cidrCalls := answerFirst(cs, "servicecidrs", 2, unavailable)
	version, cidr, err := discover(context.Background(), cs, steppedRetry(t, 0))
	if err != nil || version != "1.35" || cidr != "10.0.0.0/24" {
		t.Errorf("discover = %q, %q, %v; want 1.35, 10.0.0.0/24 and no error", version, cidr, err)
	}
	if *versionCalls != 3 || *cidrCalls != 3 {
		t.Errorf("asked %d times for the version and %d for the ServiceCIDR, want 3 each (2 unavailable, 1 answered)", *versionCalls, *cidrCalls)
	}
}

// The control: a definite answer (the ServiceCIDR does not exist) is not
// retried and falls back to the Service at once.
func TestDiscoverFallsBackOnADefiniteAnswer(t *testing.T) {
	cs := clusterWithServiceCIDR()
	calls := answerFirst(cs, "servicecidrs", 1, apierrors.NewNotFound(schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}, "kubernetes"))
	_, cidr, err := discover(context.Background(), cs, steppedRetry(t, 0))
	if err != nil || cidr != "10.100.0.0/16" || *calls != 1 {
		t.Errorf("discover = %q, %v after %d ServiceCIDR gets; want the Service's EKS default 10.100.0.0/16 after 1", cidr, err, *calls)
	}
}

// When ctx ends while the API server still fails, the settings stay empty
// and the error says the answer was transient, so the caller can refuse
// to start rather than default.
func TestDiscoverGivesUpTransientlyWhenCtxEnds(t *testing.T) {
	cs := clusterWithServiceCIDR()
	answerFirst(cs, "version", 1<<30, apierrors.NewServiceUnavailable("restarting"))
	answerFirst(cs, "servicecidrs", 1<<30, apierrors.NewServiceUnavailable("restarting"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	version, cidr, err := discover(ctx, cs, steppedRetry(t, 0))
	if version != "" || cidr != "" || !errors.Is(err, ErrNoAnswer) || !errors.Is(err, context.Canceled) {
		t.Errorf("discover = %q, %q, %v; want empty settings and ErrNoAnswer", version, cidr, err)
	}
}

// A restarted API server refuses the first reads while its RBAC
// authorizer syncs: within AuthGrace they are asked again, and the
// settings are the ServiceCIDR's, not the Service fallback's.
func TestDiscoverWaitsOutARestartedServersRefusals(t *testing.T) {
	cs := clusterWithServiceCIDR()
	gr := schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}
	calls := answerFirst(cs, "servicecidrs", 2, apierrors.NewForbidden(gr, "kubernetes", errors.New("RBAC not synced")))
	_, cidr, err := discover(context.Background(), cs, steppedRetry(t, time.Hour))
	if err != nil || cidr != "10.0.0.0/24" || *calls != 3 {
		t.Errorf("discover = %q, %v after %d ServiceCIDR gets; want 10.0.0.0/24 after 3", cidr, err, *calls)
	}
	// The control: past AuthGrace, Forbidden is a definite answer (no
	// right to read ServiceCIDRs) and the Service is asked instead.
	cs = clusterWithServiceCIDR()
	calls = answerFirst(cs, "servicecidrs", 2, apierrors.NewForbidden(gr, "kubernetes", errors.New("no RBAC")))
	_, cidr, err = discover(context.Background(), cs, steppedRetry(t, 0))
	if err != nil || cidr != "10.100.0.0/16" || *calls != 1 {
		t.Errorf("discover = %q, %v after %d ServiceCIDR gets; want the Service's 10.100.0.0/16 after 1", cidr, err, *calls)
	}
}

// steppedRetry returns a retry whose clock is a fake one that a goroutine
// steps by 2 s (twice Cap, more than a jittered wait) whenever do waits on
// it, until the test ends: every wait is exactly 2 s of fake time, so
// AuthGrace covers a known number of reads.
func steppedRetry(t *testing.T, authGrace time.Duration) retry {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			default:
			}
			if fc.HasWaiters() {
				fc.Step(2 * time.Second)
			}
			goruntime.Gosched()
		}
	}()
	return retry{Cap: time.Second, AuthGrace: authGrace, Clock: fc}
}

// Refusals are taken for a restarting server for AuthGrace of the
// injected clock, then as a definite answer: with waits of 2 s and a
// grace of 10 s, the reads at 0, 2, 4, 6 and 8 s are retried and the one
// at 10 s falls back to the Service.
func TestDiscoverRefusalsBecomeDefiniteAfterAuthGrace(t *testing.T) {
	cs := clusterWithServiceCIDR()
	gr := schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}
	calls := answerFirst(cs, "servicecidrs", 1<<30, apierrors.NewForbidden(gr, "kubernetes", errors.New("no RBAC")))
	_, cidr, err := discover(context.Background(), cs, steppedRetry(t, 10*time.Second))
	if err != nil || cidr != "10.100.0.0/16" || *calls != 6 {
		t.Errorf("discover = %q, %v after %d ServiceCIDR gets; want the Service's 10.100.0.0/16 after 6", cidr, err, *calls)
	}
}
