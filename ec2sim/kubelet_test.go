package ec2sim

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/catalog"
)

type kubeEnv struct {
	*testEnv
	clk  *testingclock.FakeClock
	kube client.Client
}

func newKubeEnv(t *testing.T, cfg Config, objs ...client.Object) *kubeEnv {
	t.Helper()
	kube := fake.NewClientBuilder().WithScheme(scheme.Scheme).
		WithStatusSubresource(&corev1.Node{}, &karpv1.NodeClaim{}).WithObjects(objs...).Build()
	clk := testingclock.NewFakeClock(t0)
	cfg.Clock, cfg.Kube = clk, kube
	if cfg.PendingDelay == 0 {
		cfg.PendingDelay = time.Second
	}
	if cfg.BootDelay == 0 {
		cfg.BootDelay = 2 * time.Second
	}
	return &kubeEnv{testEnv: newTestEnv(t, cfg), clk: clk, kube: kube}
}

// advance steps the clock and runs one kubelet pass.
func (k *kubeEnv) advance(t *testing.T, d time.Duration) {
	t.Helper()
	k.clk.Step(d)
	if err := k.sim.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (k *kubeEnv) launch(t *testing.T, lt, instanceType string, tags map[string]string) types.Instance {
	t.Helper()
	out, err := k.ec2.CreateFleet(context.Background(), fleetInput(lt, types.DefaultTargetCapacityTypeSpot, 1, tags, ov(instanceType, "us-east-1b")))
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("CreateFleet: %v %+v", err, out)
	}
	d, err := k.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: out.Instances[0].InstanceIds})
	if err != nil {
		t.Fatal(err)
	}
	return d.Reservations[0].Instances[0]
}

func (k *kubeEnv) node(t *testing.T, name string) (*corev1.Node, bool) {
	t.Helper()
	n := &corev1.Node{}
	err := k.kube.Get(context.Background(), client.ObjectKey{Name: name}, n)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return n, true
}

func hasTaint(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

// karpenterAL2023UserData is user data as Karpenter v1.14's AL2023
// family writes it (amifamily/bootstrap/nodeadm.go): a user NodeConfig
// part first, then Karpenter's, whose taints are a KubeletConfiguration
// field and whose labels a quoted --node-labels flag.
const karpenterAL2023UserData = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  kubelet:
    flags:
    - --node-labels=team=b,from-user=yes

--//
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash
echo user script

--//
Content-Type: application/node.eks.aws

# Karpenter Generated NodeConfig
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
metadata:
  creationTimestamp: null
spec:
  cluster:
    apiServerEndpoint: https://127.0.0.1:6443
    certificateAuthority: Y2E=
    cidr: 172.20.0.0/16
    name: demo
  containerd: {}
  instance:
    localStorage: {}
  kubelet:
    config:
      clusterDNS:
      - 172.20.0.10
      maxPods: 29
      registerWithTaints:
      - effect: NoSchedule
        key: dedicated
        value: batch
      - effect: NoSchedule
        key: example.com/cni-not-ready
      - effect: NoExecute
        key: karpenter.sh/unregistered
    flags:
    - --node-labels="karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=spot,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,team=a"

--//--
`

// TestKubeletRegistersNodeLikeKarpenterBootstrap: the Node has the labels
// and taints of the user data (nothing of the NodeClaim, which a kubelet
// does not know, nor of the instance's tags), kubelet's and the cloud
// provider's labels, the catalogue's capacity, and goes away with its
// instance.
func TestKubeletRegistersNodeLikeKarpenterBootstrap(t *testing.T) {
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-x7k2p", Labels: map[string]string{karpv1.NodePoolLabelKey: "default", "from-nodeclaim": "x"}},
	}
	env := newKubeEnv(t, Config{}, nc)
	ctx := context.Background()
	env.launchTemplate(t, "nodes", env.al2023(t, "x86_64"), karpenterAL2023UserData)
	in := env.launch(t, "nodes", "m5.large", map[string]string{"karpenter.sh/nodeclaim": nc.Name, "karpenter.sh/nodepool": "tag-only"})
	name := *in.PrivateDnsName

	env.advance(t, 2900*time.Millisecond) // pending 1s + boot 2s not over
	if _, ok := env.node(t, name); ok {
		t.Fatal("node joined before boot delay")
	}
	env.advance(t, 200*time.Millisecond)
	node, ok := env.node(t, name)
	if !ok {
		t.Fatal("node did not join")
	}
	it, _ := catalog.Get("m5.large")
	if node.Spec.ProviderID != "aws:///us-east-1b/"+*in.InstanceId || node.Annotations[KwokNodeAnnotation] != "fake" {
		t.Errorf("providerID %q annotations %v", node.Spec.ProviderID, node.Annotations)
	}
	for k, v := range map[string]string{
		"node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1b", "topology.kubernetes.io/region": "us-east-1",
		"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": name, "karpenter.sh/capacity-type": "spot",
		"karpenter.sh/nodepool": "default", "team": "a", "from-user": "yes", "karpenter.k8s.aws/ec2nodeclass": "default",
		"topology.k8s.aws/zone-id": "use1-az2",
	} {
		if node.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, node.Labels[k], v)
		}
	}
	for _, k := range []string{"from-nodeclaim", "karpenter.k8s.aws/instance-family"} {
		if v, ok := node.Labels[k]; ok {
			t.Errorf("label %s=%q: not in the user data", k, v)
		}
	}
	if got := taintList(node.Spec.Taints); got != "dedicated=batch:NoSchedule,example.com/cni-not-ready:NoSchedule,karpenter.sh/unregistered:NoExecute" {
		t.Errorf("taints %s", got)
	}
	if !equalResources(node.Status.Capacity, it.Capacity()) || !equalResources(node.Status.Allocatable, it.Allocatable) {
		t.Errorf("capacity %v allocatable %v", node.Status.Capacity, node.Status.Allocatable)
	}
	if ni := node.Status.NodeInfo; ni.KubeletVersion != "v1.35.4" || ni.Architecture != "amd64" || ni.OperatingSystem != "linux" || ni.OSImage == "" {
		t.Errorf("nodeInfo %+v", ni)
	}
	addrs := map[corev1.NodeAddressType]string{}
	for _, a := range node.Status.Addresses {
		addrs[a.Type] = a.Address
	}
	if addrs[corev1.NodeInternalIP] != *in.PrivateIpAddress || addrs[corev1.NodeHostName] != name || addrs[corev1.NodeInternalDNS] != name {
		t.Errorf("addresses %v", addrs)
	}
	if snap := env.sim.Instances(); snap[0].NodeName != name {
		t.Errorf("snapshot node name %q", snap[0].NodeName)
	}

	if _, err := env.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{*in.InstanceId}}); err != nil {
		t.Fatal(err)
	}
	env.advance(t, 10*time.Millisecond)
	if _, ok := env.node(t, name); ok {
		t.Fatal("node survived its instance")
	}
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if q.Cmp(b[k]) != 0 {
			return false
		}
	}
	return true
}

func TestScriptedKubeletBehaviour(t *testing.T) {
	env := newKubeEnv(t, Config{MarkReady: true})
	ami := env.al2023(t, "arm64")
	env.launchTemplate(t, "never", ami, "#!/bin/bash\n# karpx-sim: never-join\necho hi\n")
	env.launchTemplate(t, "plain", ami, "")
	never := env.launch(t, "never", "m7g.large", nil)
	slow := env.launch(t, "plain", "m7g.large", map[string]string{
		BehaviorTagKey: "boot-delay=10s not-ready=2s late-taint=example.com/init=x:NoSchedule@4s allocatable=memory:-512Mi"})

	env.advance(t, 3*time.Second)
	if _, ok := env.node(t, *slow.PrivateDnsName); ok {
		t.Fatal("boot-delay=10s joined after 3s")
	}
	env.advance(t, 8*time.Second) // 11s: running since 1s, 10s boot
	node, ok := env.node(t, *slow.PrivateDnsName)
	if !ok {
		t.Fatal("slow instance did not join")
	}
	if _, kwok := node.Annotations[KwokNodeAnnotation]; kwok || node.Annotations[KwokStatusAnnotation] != KwokStatusCustom || len(node.Status.Conditions) != 0 {
		t.Fatalf("node ready during not-ready window: %v %v", node.Annotations, node.Status.Conditions)
	}
	if !hasTaint(node, "example.com/init", corev1.TaintEffectNoSchedule) {
		t.Fatal("late taint missing")
	}
	it, _ := catalog.Get("m7g.large")
	want := it.Allocatable.Memory().DeepCopy()
	want.Sub(resource.MustParse("512Mi"))
	if got := node.Status.Allocatable[corev1.ResourceMemory]; got.Cmp(want) != 0 {
		t.Fatalf("allocatable memory %s, want %s", got.String(), want.String())
	}
	env.advance(t, 2*time.Second)
	node, _ = env.node(t, *slow.PrivateDnsName)
	if _, custom := node.Annotations[KwokStatusAnnotation]; node.Annotations[KwokNodeAnnotation] != "fake" || custom || len(node.Status.Conditions) == 0 || node.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Fatalf("node not ready after window: %v %v", node.Annotations, node.Status.Conditions)
	}
	if !hasTaint(node, "example.com/init", corev1.TaintEffectNoSchedule) {
		t.Fatal("late taint removed early")
	}
	env.advance(t, 2*time.Second)
	node, _ = env.node(t, *slow.PrivateDnsName)
	// No user data: kubelet registers no taint of its own.
	if len(node.Spec.Taints) != 0 {
		t.Fatalf("taints after 4s: %v", node.Spec.Taints)
	}

	env.advance(t, time.Hour)
	if _, ok := env.node(t, *never.PrivateDnsName); ok {
		t.Fatal("never-join instance joined")
	}
	var nodes corev1.NodeList
	if err := env.kube.List(context.Background(), &nodes); err != nil || len(nodes.Items) != 1 {
		t.Fatalf("nodes: %v %d", err, len(nodes.Items))
	}
	if st := env.sim.Instances()[0]; st.Behavior != "never-join" || st.State != StateRunning {
		t.Fatalf("never-join snapshot %+v", st)
	}
}

func TestBehaviorTagOnCreateTagsAndInvalidMarkers(t *testing.T) {
	env := newKubeEnv(t, Config{})
	ctx := context.Background()
	ami := env.al2023(t, "x86_64")
	env.launchTemplate(t, "plain", ami, "")
	in := env.launch(t, "plain", "m5.large", nil)
	// Tagging before the instance joins changes its behaviour.
	if _, err := env.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{*in.InstanceId},
		Tags: []types.Tag{{Key: aws.String(BehaviorTagKey), Value: aws.String("never-join")}}}); err != nil {
		t.Fatal(err)
	}
	env.advance(t, time.Minute)
	if _, ok := env.node(t, *in.PrivateDnsName); ok {
		t.Fatal("joined despite never-join tag")
	}
	_, err := env.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("bad-marker"),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(ami), UserData: aws.String("IyBrYXJweC1zaW06IGZseQo=")}}) // "# karpx-sim: fly"
	apiErr(t, err, "InvalidParameterValue", 400)
}

func TestParseBehavior(t *testing.T) {
	b, err := ParseBehavior("never-join boot-delay=30s not-ready=5s late-taint=a.io/b:NoExecute@1m late-taint=c=d:PreferNoSchedule@0s allocatable=cpu:-100m allocatable=cpu:-100m not-ready-window=150s+20s late-resource=nvidia.com/gpu@90s")
	if err != nil {
		t.Fatal(err)
	}
	if !b.NeverJoin || *b.BootDelay != 30*time.Second || b.NotReadyFor != 5*time.Second || len(b.LateTaints) != 2 ||
		b.LateTaints[1].Taint != (corev1.Taint{Key: "c", Value: "d", Effect: corev1.TaintEffectPreferNoSchedule}) {
		t.Fatalf("%+v", b)
	}
	if q := b.AllocatableOffset[corev1.ResourceCPU]; q.String() != "-200m" {
		t.Fatalf("cpu offset %s", q.String())
	}
	if s := b.String(); s != "never-join boot-delay=30s not-ready=5s late-taint=a.io/b:NoExecute@1m0s late-taint=c=d:PreferNoSchedule@0s allocatable=cpu:-200m not-ready-window=2m30s+20s late-resource=nvidia.com/gpu@1m30s" {
		t.Fatalf("String() = %q", s)
	}
	ud, err := behaviorFromUserData("MIME-Version: 1.0\n\n#!/bin/bash\n  #   karpx-sim: boot-delay=1s\n# karpx-sim: not-ready=2s\n")
	if err != nil || *ud.BootDelay != time.Second || ud.NotReadyFor != 2*time.Second {
		t.Fatalf("user data: %v %+v", err, ud)
	}
	for _, bad := range []string{"fly", "boot-delay", "boot-delay=-1s", "late-taint=k:Sometimes@1s", "late-taint=k:NoSchedule", "allocatable=cpu", "never-join=yes", "not-ready-window=1s", "not-ready-window=1s+0s", "late-resource=@1s", "late-resource=nvidia.com/gpu"} {
		if _, err := ParseBehavior(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

func TestNotReadyWindowAndLateResource(t *testing.T) {
	env := newKubeEnv(t, Config{MarkReady: true})
	env.launchTemplate(t, "gpu", env.al2023(t, "x86_64"), "")
	in := env.launch(t, "gpu", "g5.12xlarge", map[string]string{BehaviorTagKey: "late-resource=nvidia.com/gpu@18s not-ready-window=30s+4s"})
	name := *in.PrivateDnsName
	env.advance(t, 3*time.Second) // pending 1s + boot 2s: created now
	node, ok := env.node(t, name)
	if !ok {
		t.Fatal("node did not join")
	}
	if _, has := node.Status.Allocatable["nvidia.com/gpu"]; has {
		t.Fatalf("gpu advertised at registration: %v", node.Status.Allocatable)
	}
	if _, has := node.Status.Capacity["nvidia.com/gpu"]; has {
		t.Fatalf("gpu in capacity at registration: %v", node.Status.Capacity)
	}
	env.advance(t, 17*time.Second)
	node, _ = env.node(t, name)
	if _, has := node.Status.Allocatable["nvidia.com/gpu"]; has {
		t.Fatal("gpu advertised before 18s")
	}
	env.advance(t, time.Second)
	node, _ = env.node(t, name)
	if q := node.Status.Allocatable["nvidia.com/gpu"]; q.Value() != 4 {
		t.Fatalf("allocatable gpu %s at 18s, want 4", q.String())
	}
	if q := node.Status.Capacity["nvidia.com/gpu"]; q.Value() != 4 {
		t.Fatalf("capacity gpu %s at 18s, want 4", q.String())
	}
	if readyStatus(node) != corev1.ConditionTrue {
		t.Fatal("not Ready before the window")
	}
	env.advance(t, 12*time.Second) // 30s
	node, _ = env.node(t, name)
	if _, kwok := node.Annotations[KwokNodeAnnotation]; kwok || node.Annotations[KwokStatusAnnotation] != KwokStatusCustom || readyStatus(node) != corev1.ConditionFalse {
		t.Fatalf("in the window: annotations %v ready %s", node.Annotations, readyStatus(node))
	}
	env.advance(t, 3900*time.Millisecond)
	node, _ = env.node(t, name)
	if readyStatus(node) != corev1.ConditionFalse {
		t.Fatal("Ready before the window ended")
	}
	env.advance(t, 100*time.Millisecond) // 34s
	node, _ = env.node(t, name)
	if _, custom := node.Annotations[KwokStatusAnnotation]; node.Annotations[KwokNodeAnnotation] != "fake" || custom || readyStatus(node) != corev1.ConditionTrue {
		t.Fatalf("after the window: annotations %v ready %s", node.Annotations, readyStatus(node))
	}
	env.advance(t, time.Minute)
	node, _ = env.node(t, name)
	if readyStatus(node) != corev1.ConditionTrue {
		t.Fatal("NotReady again after the window")
	}
}

// taintList renders taints as kubelet's --register-with-taints value, in
// their order.
func taintList(taints []corev1.Taint) string {
	out := make([]string, 0, len(taints))
	for _, t := range taints {
		out = append(out, t.ToString())
	}
	return strings.Join(out, ",")
}

// TestKubeletRegistersNodesSideBySide: instances that finish booting in
// the same pass register their Nodes at the same time, as their own
// kubelets would, not one after the other. Each Node create is held until
// all four are in flight; one at a time, none would see the others (and
// each would give up after 5 s).
func TestKubeletRegistersNodesSideBySide(t *testing.T) {
	const instances = 4
	var (
		mu             sync.Mutex
		inFlight, most int
	)
	all := make(chan struct{})
	base := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithStatusSubresource(&corev1.Node{}).Build()
	kube := interceptor.NewClient(base, interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*corev1.Node); ok {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			if inFlight == instances {
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
			case <-time.After(5 * time.Second):
			}
			defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
		}
		return c.Create(ctx, obj, opts...)
	}})
	clk := testingclock.NewFakeClock(t0)
	env := &kubeEnv{testEnv: newTestEnv(t, Config{Clock: clk, Kube: kube, PendingDelay: time.Second, BootDelay: 2 * time.Second}), clk: clk, kube: kube}
	env.launchTemplate(t, "plain", env.al2023(t, "arm64"), "")
	var launched []types.Instance
	for range instances {
		launched = append(launched, env.launch(t, "plain", "m7g.large", nil))
	}
	env.advance(t, 3*time.Second)
	if most != instances {
		t.Errorf("%d Node creates in flight at most, want all %d side by side", most, instances)
	}
	for _, in := range launched {
		if _, ok := env.node(t, *in.PrivateDnsName); !ok {
			t.Errorf("instance %s: no Node after its boot", *in.InstanceId)
		}
	}
}
