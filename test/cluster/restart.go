package cluster

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Restart stops every component of the control plane (kube-apiserver,
// etcd, kube-controller-manager, kube-scheduler, kwok) with `kwokctl stop
// cluster`, keeps it down for down, starts it again with `kwokctl start
// cluster` (same ports, same etcd data) and waits until the API server
// answers. Clients see connection errors meanwhile, as in a control-plane
// upgrade or an API server crash.
func (c *Cluster) Restart(ctx context.Context, down time.Duration) error {
	if _, err := c.kwokctl(ctx, "stop", "cluster"); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	if _, err := c.kwokctl(ctx, "start", "cluster"); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.Discovery().ServerVersion()
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("API server not back after restart: %w", err)
	}
	return nil
}
