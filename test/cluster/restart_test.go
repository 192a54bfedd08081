package cluster

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// An API server down for longer than the renew deadline of the
// scheduler's and the controller manager's leader election (10 s) leaves
// both running: the clusters start them without leader election
// (kwokctlConfig), so a chaos test's RestartAPIServer under load cannot
// leave a cluster that schedules nothing. The control starts them with
// leader election on, and both exit after the same outage (at their renew
// deadline, which under load can fall just after the outage ends).
func TestSchedulerAndControllerManagerSurviveAPIServerOutage(t *testing.T) {
	SkipWithoutControlPlane(t)
	const down = 15 * time.Second // > the 10 s renew deadline
	for _, tc := range []struct {
		name           string
		leaderElection bool
		wantRunning    bool
	}{
		{"default", false, true},
		{"control-leader-election", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			// Probed: the scheduler has placed a pod.
			c, err := StartProbed(ctx, Options{Name: "karpx-outage-" + tc.name[:7], LeaderElection: tc.leaderElection}, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = c.Stop() }()
			// The outage must come after both finished starting: the
			// controller manager gives up at start-up when the API server is
			// gone (whatever its leader election), and a component still
			// waiting for its first Lease has none to lose. The controller
			// manager's service account controller has run once the default
			// namespace's ServiceAccount exists.
			ready := []string{"serviceaccount/default", "-n", "default"}
			if tc.leaderElection {
				ready = []string{"lease/kube-scheduler", "lease/kube-controller-manager", "-n", "kube-system"}
			}
			if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				_, err := c.Kubectl(ctx, nil, append([]string{"get", "-o", "name"}, ready...)...)
				return err == nil, nil
			}); err != nil {
				t.Fatalf("waiting for %v: %v", ready, err)
			}
			if err := c.RestartAPIServer(ctx, down); err != nil {
				t.Fatal(err)
			}
			for _, comp := range []string{"kube-scheduler", "kube-controller-manager"} {
				// Without leader election, watched for 10 s after the
				// outage: a survivor must not exit late. With it (the
				// control), waited on for up to 30 s: a component gives
				// up its Lease at the renew deadline counted from its last
				// renewal's retry, and its last attempt can hang on the
				// client's 5-s request timeout, so the exit can land just
				// after the outage ends; what matters is that it exits.
				var running bool
				watch := 10 * time.Second
				if !tc.wantRunning {
					watch = 30 * time.Second
				}
				_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, watch, true, func(context.Context) (bool, error) {
					running, err = c.Running(comp)
					return err != nil || !running, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if running != tc.wantRunning {
					t.Errorf("%s running=%v after a %s API server outage, want %v\n%s", comp, running, down, tc.wantRunning, c.Logs(comp))
				}
			}
		})
	}
}
