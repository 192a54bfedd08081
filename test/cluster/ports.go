package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Ports are the TCP ports a cluster's components listen on, on the host:
// the six kwokctl's binary runtime gives out (kwok v0.8.0,
// runtime/binary.setupPorts; metrics-server is not enabled).
type Ports struct {
	Etcd, EtcdPeer, APIServer, ControllerManager, Scheduler, KwokController uint32
}

// list returns the ports in a fixed order.
func (p Ports) list() []uint32 {
	return []uint32{p.Etcd, p.EtcdPeer, p.APIServer, p.ControllerManager, p.Scheduler, p.KwokController}
}

// Port range for clusters: below Linux's default ephemeral range
// (32768–60999, net.ipv4.ip_local_port_range), so that no outgoing
// connection's local port takes one while a cluster is down for Restart,
// as kwokctl's own choice is.
const (
	minPort = 20000
	maxPort = 32767
)

// pickPorts returns six distinct ports in [minPort, maxPort] that are free
// on 127.0.0.1 and on every address, drawn at random.
//
// kwokctl's own choice (kwok v0.8.0, utils/net.GetUnusedPort) is the first
// free port counting down from 32767. Clusters of several test processes
// start at once, and a cluster stopped by Restart frees its ports: with
// that choice, the next cluster to start takes exactly those ports, and the
// restarted cluster's kwok controller then talks to another cluster's API
// server (the CI failure "x509: certificate signed by unknown authority …
// kwok-ca"). Drawn at random from 12,768 ports, two clusters' picks
// overlap with odds of about 1 in 350. It returns an error when no free
// port is found in 1,000 draws.
func pickPorts() (Ports, error) {
	seen := map[uint32]bool{}
	var picked []uint32
	for draws := 0; len(picked) < 6; draws++ {
		if draws == 1000 {
			return Ports{}, fmt.Errorf("no 6 free TCP ports in %d–%d after %d draws", minPort, maxPort, draws)
		}
		p := uint32(minPort + rand.IntN(maxPort-minPort+1))
		if seen[p] {
			continue
		}
		seen[p] = true
		if portFree(p) {
			picked = append(picked, p)
		}
	}
	return Ports{Etcd: picked[0], EtcdPeer: picked[1], APIServer: picked[2],
		ControllerManager: picked[3], Scheduler: picked[4], KwokController: picked[5]}, nil
}

// portFree reports whether a listener can bind port on 127.0.0.1 and on
// every address, the test kwokctl makes.
func portFree(port uint32) bool {
	for _, host := range []string{"127.0.0.1", ""} {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
		if err != nil {
			return false
		}
		ln.Close()
	}
	return true
}

// holdPorts listens on every port for down while the component that owns
// it is down, answering each connection by closing it (clients see a
// reset, as from a crashed server), so that a cluster starting meanwhile
// cannot take it; only the components' start-up is left as a window. A
// killed process's threads may still hold its socket for a moment after
// its leader shows as a zombie, so each listen is retried for up to 10 s.
// It returns the listen's error or ctx's.
func holdPorts(ctx context.Context, down time.Duration, ports ...uint32) error {
	for _, port := range ports {
		var ln net.Listener
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			var err error
			ln, err = net.Listen("tcp", ":"+strconv.Itoa(int(port)))
			return err == nil, nil
		}); err != nil {
			return fmt.Errorf("holding port %d while its component is down: %w", port, err)
		}
		defer ln.Close()
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				conn.Close()
			}
		}()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
		return nil
	}
}
