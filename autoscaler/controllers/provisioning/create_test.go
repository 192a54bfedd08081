package provisioning

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/autoscaler/scheduling"
)

// gatedCreates is a client whose NodeClaim creations each wait until
// gate of them are in flight at once, or the last of total has started (a
// barrier), recording the most seen in flight; creations of the NodePool
// named in failPool fail. A caller that creates one at a time never fills
// the barrier: its first creation gives up after a guard, the barrier
// opens for good, and the test fails on the in-flight count, not on time.
type gatedCreates struct {
	client.Client
	gate, total int
	failPool    string

	mu       sync.Mutex
	inFlight int
	started  int
	most     int
	full     chan struct{}
	open     bool
}

func (c *gatedCreates) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.mu.Lock()
	c.inFlight++
	c.started++
	c.most = max(c.most, c.inFlight)
	full, open := c.full, c.open
	if c.inFlight == c.gate || c.started == c.total {
		close(full)
		c.full = make(chan struct{})
	}
	c.mu.Unlock()
	if !open {
		select {
		case <-full:
		case <-time.After(5 * time.Second): // deadlock guard only
			c.mu.Lock()
			c.open = true
			c.mu.Unlock()
		}
	}
	c.mu.Lock()
	c.inFlight--
	c.mu.Unlock()
	if obj.GetLabels()[karpv1.NodePoolLabelKey] == c.failPool {
		return errors.New("injected: API server unavailable")
	}
	return c.Client.Create(ctx, obj, opts...)
}

func testPlan(pool string, pod string) scheduling.NodeClaimPlan {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	return scheduling.NodeClaimPlan{NodePool: np,
		Pods:          []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "default", UID: types.UID(pod)}}},
		InstanceTypes: []*cloudprovider.InstanceType{{Name: "m5.large"}}}
}

// A pass's NodeClaims are created createWorkers at a time (Karpenter
// creates them in parallel; one by one, the last of a 114-NodeClaim burst
// waited for 113 API round trips), never more; every pod of a created
// NodeClaim is nominated to it, and a failed creation is returned in plan
// order without stopping the others.
func TestCreateNodeClaimsInParallel(t *testing.T) {
	for _, n := range []int{1, 3, createWorkers, 3*createWorkers + 1} {
		t.Run(fmt.Sprintf("%d NodeClaims", n), func(t *testing.T) {
			var plans []scheduling.NodeClaimPlan
			for i := range n {
				pool := "default"
				if i == n-1 && n > 1 {
					pool = "broken"
				}
				plans = append(plans, testPlan(pool, fmt.Sprintf("pod-%03d", i)))
			}
			kube := &gatedCreates{Client: fake.NewClientBuilder().WithScheme(scheme.New()).Build(),
				gate: min(createWorkers, n), total: n, failPool: "broken", full: make(chan struct{})}
			p := NewProvisioner(kube, twoFamilies{}, record.NewFakeRecorder(4*n), nil, Options{})
			var res PassResult
			errs := p.createNodeClaims(context.Background(), plans, &res)
			if kube.most != min(createWorkers, n) {
				t.Errorf("at most %d creations in flight, want %d", kube.most, min(createWorkers, n))
			}
			wantCreated := n
			if n > 1 {
				wantCreated = n - 1
				if len(errs) != 1 || !strings.Contains(errs[0].Error(), `NodePool "broken"`) {
					t.Errorf("errors %v, want one naming NodePool \"broken\"", errs)
				}
			} else if len(errs) != 0 {
				t.Errorf("errors %v, want none", errs)
			}
			if len(res.Created) != wantCreated {
				t.Fatalf("created %d NodeClaims, want %d", len(res.Created), wantCreated)
			}
			var list karpv1.NodeClaimList
			if err := kube.List(context.Background(), &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != wantCreated {
				t.Errorf("%d NodeClaims stored, want %d", len(list.Items), wantCreated)
			}
			// Created lists plan order: plan i's pod is nominated to Created[i].
			for i, name := range res.Created {
				if got := p.nominated.get(plans[i].Pods[0].UID); got != name {
					t.Errorf("pod %s nominated to %q, want %q", plans[i].Pods[0].Name, got, name)
				}
			}
			if n > 1 {
				if got := p.nominated.get(plans[n-1].Pods[0].UID); got != "" {
					t.Errorf("pod of the failed NodeClaim nominated to %q, want none", got)
				}
			}
		})
	}
}

// A pass creates the NodeClaims that carry the most pods first (ties in
// plan order), so that with more NodeClaims than createWorkers the pods
// that wait for the last round trips are few, and the launches, which
// follow creation, take their CreateFleet tokens in that order too.
// Created lists that order.
func TestCreateNodeClaimsMostPodsFirst(t *testing.T) {
	withPods := func(name string, n int) scheduling.NodeClaimPlan {
		plan := testPlan("default", name+"-0")
		for i := 1; i < n; i++ {
			plan.Pods = append(plan.Pods, testPlan("default", fmt.Sprintf("%s-%d", name, i)).Pods[0])
		}
		return plan
	}
	plans := []scheduling.NodeClaimPlan{withPods("one", 1), withPods("three", 3), withPods("two-a", 2), withPods("two-b", 2)}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	p := NewProvisioner(kube, twoFamilies{}, record.NewFakeRecorder(32), nil, Options{})
	var res PassResult
	if errs := p.createNodeClaims(context.Background(), plans, &res); len(errs) > 0 {
		t.Fatal(errs)
	}
	want := []string{"three", "two-a", "two-b", "one"}
	if len(res.Created) != len(want) {
		t.Fatalf("created %v, want %d NodeClaims", res.Created, len(want))
	}
	for i, name := range want {
		if got := p.nominated.get(types.UID(name + "-0")); got != res.Created[i] {
			t.Errorf("Created[%d] = %s, but the pods of plan %q are nominated to %q: want that plan at %d", i, res.Created[i], name, got, i)
		}
	}
	if plans[0].Pods[0].Name != "one-0" {
		t.Errorf("the caller's plans were reordered: first is %s", plans[0].Pods[0].Name)
	}
}
