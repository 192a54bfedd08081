package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

func TestPickPortsDistinctFreeAndBelowEphemeralRange(t *testing.T) {
	for range 50 {
		p, err := pickPorts()
		if err != nil {
			t.Fatal(err)
		}
		list := p.list()
		for i, port := range list {
			if port < minPort || port > maxPort {
				t.Fatalf("port %d outside %d–%d: %+v", port, minPort, maxPort, p)
			}
			if slices.Contains(list[i+1:], port) {
				t.Fatalf("port %d picked twice: %+v", port, p)
			}
		}
	}
}

// A cluster that Restart keeps down holds its ports, so that a cluster
// started meanwhile takes none of them, and both work afterwards: the
// restarted cluster's kwok controller talks to its own API server (Probe),
// not to the newcomer's. Without the hold, `kwokctl stop cluster` leaves
// the ports free for the whole down time (the control, first), and a
// newcomer that took them made kwok fail with "x509: certificate signed
// by unknown authority … kwok-ca" in a CI run of TestChaosControlPlaneRestart.
func TestRestartHoldsPortsFromClustersStartingMeanwhile(t *testing.T) {
	SkipWithoutControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, err := StartProbed(ctx, Options{Name: "karpx-ports-a"}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Stop() }()

	// Control: a plain stop frees every port.
	if _, err := a.kwokctl(ctx, "stop", "cluster"); err != nil {
		t.Fatal(err)
	}
	for _, port := range a.ports.list() {
		if err := awaitPortFree(ctx, port, true); err != nil {
			t.Fatalf("control: port %d still taken after `kwokctl stop cluster`: %v", port, err)
		}
	}
	if _, err := a.kwokctl(ctx, "start", "cluster"); err != nil {
		t.Fatal(err)
	}
	if err := a.awaitAPIServer(ctx, 250*time.Millisecond); err != nil {
		t.Fatal(err)
	}

	restarted := make(chan error, 1)
	go func() { restarted <- a.Restart(ctx, 15*time.Second) }()
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		// kwokctl removes the pid file of a process it stopped.
		running, err := a.Running("kube-apiserver")
		return err != nil || !running, nil
	}); err != nil {
		t.Fatalf("kube-apiserver of %s never went down: %v", a.Name, err)
	}
	// Restart takes each port once its process has exited.
	for _, port := range a.ports.list() {
		if err := awaitPortFree(ctx, port, false); err != nil {
			t.Fatalf("port %d of the stopped cluster is free: Restart does not hold it", port)
		}
	}
	b, err := StartProbed(ctx, Options{Name: "karpx-ports-b"}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Stop() }()
	for _, port := range b.ports.list() {
		if slices.Contains(a.ports.list(), port) {
			t.Errorf("cluster %s took port %d of %s while it was down (%+v vs %+v)", b.Name, port, a.Name, b.ports, a.ports)
		}
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	if err := a.Probe(ctx); err != nil {
		for _, comp := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller"} {
			running, _ := a.Running(comp)
			t.Logf("%s running=%t:\n%s", comp, running, a.Logs(comp))
		}
		t.Fatalf("restarted cluster does not work: %v", err)
	}
	t.Logf("restarted %s ports=%+v; started %s meanwhile ports=%+v", a.Name, a.ports, b.Name, b.ports)
}

// awaitPortFree polls portFree every 50 ms, for up to 10 s (a stopped
// process's socket may outlive it for a moment), until it reports free;
// it returns the poll's error.
func awaitPortFree(ctx context.Context, port uint32, free bool) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return portFree(port) == free, nil
	})
}
