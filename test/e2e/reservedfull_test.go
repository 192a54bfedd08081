package e2e

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awscloud "github.com/karpx/karpx/autoscaler/aws/cloudprovider"
	"github.com/karpx/karpx/autoscaler/operator"
	"github.com/karpx/karpx/ec2sim"
)

// TestReservedCapacityFullExplained: a NodePool that allows only reserved
// capacity, an EC2NodeClass selecting a targeted ODCR of one m5.large,
// and two pods that each need a whole m5.large. karpx plans one NodeClaim
// onto the reservation's one place and none onto the full reservation
// (the scheduling pass caps it at its free places, then the NodeClaim not
// yet launched holds it, then EC2's count says it is full): one node runs
// in the reservation, the other pod stays pending, and CreateFleet is not
// called again for it (no launch retried against the full reservation).
// The real `kubectl karpx explain pod` names the reservation, its 0 of 1
// free places and the fixes; `kubectl karpx status` lists the reservation
// under "Capacity reservations" with 0/1 and FULL. The control is the
// pending pod's own NodePool allowing on-demand too
// (TestReservedCapacity): there the extra pod launches on-demand.
func TestReservedCapacityFullExplained(t *testing.T) {
	runInParallel(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	statusAddr := l.Addr().String()
	l.Close()
	e := newEnvWithLog(t, "karpx-reserved-full", func(o *operator.Options) {
		o.FeatureGates = "ReservedCapacity=true"
		o.StatusBindAddress = statusAddr
	}, nil)
	cr, err := e.sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 1, InstanceMatchCriteria: ec2sim.MatchCriteriaTargeted, Tags: map[string]string{"team": "ml"}})
	if err != nil {
		t.Fatal(err)
	}
	pool := nodePool{Name: "reserved-only", Labels: map[string]string{"reserved": "only"}, InstanceTypes: []string{"m5.large"},
		CapacityTypes: []string{"reserved"}, Disruption: neverConsolidate,
		Requirements: []string{"{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}"}}
	e.apply(ec2NodeClassYAML("reserved-only", e.name)+"  capacityReservationSelectorTerms: [{tags: {team: ml}}]\n", pool.yaml())
	plugin := buildPlugin(t, e.root)

	web := deployment("web", 2, "1500m", "256Mi")
	web.Spec.Template.Spec.NodeSelector = map[string]string{"reserved": "only"}
	if err := e.kube.Create(e.ctx, web); err != nil {
		t.Fatal(err)
	}
	e.eventually(180*time.Second, "1 web pod Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "web") == 1, nil
	})
	fleets := e.sim.Stats()["CreateFleet"].Requests
	// Several provisioning passes (each pod change and the batch window
	// trigger one) see the pending pod while the reservation is full.
	time.Sleep(20 * time.Second)
	if n := countRunning(e.ctx, e.kube, "web"); n != 1 {
		t.Fatalf("%d web pods Running, want 1 (the reservation has one place)", n)
	}
	if n := e.sim.Stats()["CreateFleet"].Requests; n != fleets {
		t.Errorf("CreateFleet called %d more times while the reservation was full, want 0", n-fleets)
	}
	if fleets > 2 {
		t.Errorf("CreateFleet called %d times for one node, want at most 2", fleets)
	}
	for _, nc := range e.nodeClaims() {
		if nc.Labels[awscloud.LabelCapacityReservationID] != cr {
			t.Errorf("NodeClaim %s labels %v, want it in reservation %s", nc.Name, nc.Labels, cr)
		}
	}
	if st := e.sim.CapacityReservations()[0]; st.AvailableInstanceCount != 0 {
		t.Fatalf("reservation %+v, want full", st)
	}
	pending := pendingPod(t, e, "web")

	// The explanation: which reservation, its counts, what to do. The
	// controller's description of the reservation may lag its launch by
	// the description TTL, so it is asked until it says 0 of 1.
	var explained string
	e.eventually(90*time.Second, "kubectl karpx explain pod names the full reservation", func(context.Context) (bool, error) {
		explained = kubectlAnyExit(t, e, plugin, "karpx", "explain", "pod", pending, "--controller-endpoint", "http://"+statusAddr)
		return statusLineHas(explained, cr, "m5.large in us-east-1a", "0 of 1 free", "FULL", "allow on-demand or spot"), nil
	})
	for _, want := range []string{"No NodePool can launch a node for this pod.", "capacity reservations that are full or expiring: " + cr} {
		if !strings.Contains(explained, want) {
			t.Errorf("kubectl karpx explain pod %s lacks %q:\n%s", pending, want, explained)
		}
	}

	status := e.kubectlWithPath(plugin, "karpx", "status", "--budget-endpoint", "http://"+statusAddr)
	if !strings.Contains(status, "Capacity reservations") ||
		!statusLineHas(status, "reserved-only", cr, "default", "m5.large", "us-east-1a", "0/1", "active, FULL") {
		t.Errorf("kubectl karpx status does not list %s as full:\n%s", cr, status)
	}
	t.Logf("explain:\n%s\nstatus:\n%s", explained, status)
}

// pendingPod returns the name of the one pod of app not bound to a node.
func pendingPod(t *testing.T, e *env, app string) string {
	t.Helper()
	var pods corev1.PodList
	if err := e.kube.List(e.ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" && p.DeletionTimestamp.IsZero() {
			names = append(names, p.Name)
		}
	}
	if len(names) != 1 {
		t.Fatalf("pending %s pods %v, want one", app, names)
	}
	return names[0]
}

// kubectlAnyExit runs kubectl as kubectlWithPath does but returns its
// output whatever its exit status (explain exits 1 for a pod no NodePool
// can take).
func kubectlAnyExit(t *testing.T, e *env, path string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(e.ctx, "kubectl", args...)
	cmd.Env = append(cmd.Environ(), "PATH="+path, "KUBECONFIG="+e.cluster.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
