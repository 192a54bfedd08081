package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
	"github.com/karpx/karpx/catalog"
	"github.com/karpx/karpx/ec2sim"
)

const cluster = "demo"

// simEnv is a CloudProvider driving the real SDK against a loopback ec2sim.
type simEnv struct {
	endpoint string
	sim      *ec2sim.Simulator
	api      *ec2api.Client
	cp       *CloudProvider
}

func defaultNodeClass() *v1.EC2NodeClass {
	return &v1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: v1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
			SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
			AMISelectorTerms:           []v1.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       "KarpxNodeRole",
			Tags:                       map[string]string{"team": "platform"},
		},
		// As the status controller leaves it (ResolveNodeClass).
		Status: v1.EC2NodeClassStatus{InstanceProfile: "karpx_default"},
	}
}

func newSimEnv(t *testing.T, classes ...*v1.EC2NodeClass) *simEnv {
	t.Helper()
	env := ec2apitest.Start(t, ec2sim.Config{ClusterName: cluster, Throttle: ec2sim.ThrottleConfig{Disabled: true}, ShuttingDownDelay: 300 * time.Millisecond},
		// On a loaded machine net/http can close a connection while the
		// response is read (aws/aws-sdk-go-v2#2737); the standard retryer
		// retries that, and more attempts keep the tests deterministic.
		ec2api.Config{RetryMaxAttempts: 8})
	sim, api, endpoint := env.Sim, env.Client, env.Endpoint
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if len(classes) == 0 {
		classes = []*v1.EC2NodeClass{defaultNodeClass()}
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, c := range classes {
		b = b.WithObjects(c)
	}
	cp, err := New(Options{
		ClusterName: cluster, ClusterEndpoint: "https://api.demo.example", ClusterCABundle: "Q0E=",
		Region: "us-east-1", KubeClient: b.Build(), EC2API: api,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &simEnv{endpoint: endpoint, sim: sim, api: api, cp: cp}
}

func nodePool(class string) *karpv1.NodePool {
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: v1.Group, Kind: "EC2NodeClass", Name: class}
	return np
}

func nodeClaim(name string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "default", "team": "a"}}}
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: v1.Group, Kind: "EC2NodeClass", Name: "default"}
	nc.Spec.Requirements = reqs
	nc.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "a", Effect: corev1.TaintEffectNoSchedule}}
	return nc
}

func in(key string, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func find(its []*cloudprovider.InstanceType, name string) *cloudprovider.InstanceType {
	for _, it := range its {
		if it.Name == name {
			return it
		}
	}
	return nil
}

func (e *simEnv) imageName(t *testing.T, id string) string {
	t.Helper()
	out, err := e.api.DescribeImages(context.Background(), &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil || len(out.Images) != 1 {
		t.Fatalf("DescribeImages %s: %v", id, err)
	}
	return awssdk.ToString(out.Images[0].Name)
}

func TestSimGetInstanceTypes(t *testing.T) {
	e := newSimEnv(t)
	its, err := e.cp.GetInstanceTypes(context.Background(), nodePool("default"))
	if err != nil {
		t.Fatal(err)
	}
	if len(its) < 500 {
		t.Fatalf("only %d instance types", len(its))
	}
	m5 := find(its, "m5.large")
	if m5 == nil {
		t.Fatal("m5.large missing")
	}
	cat, _ := catalog.Get("m5.large")
	if !m5.Allocatable.Memory().Equal(*cat.Allocatable.Memory()) || m5.Labels[corev1.LabelArchStable] != "amd64" || m5.Capacity.Cpu().Value() != 2 {
		t.Errorf("m5.large labels/resources not from the catalogue: %v %v", m5.Labels, m5.Allocatable)
	}
	zones := map[string]bool{}
	for _, o := range m5.Offerings {
		zones[o.Zone] = true
		if !o.Available {
			t.Errorf("offering %+v unavailable", o)
		}
		switch o.CapacityType {
		case cloudprovider.CapacityTypeOnDemand:
			if o.PriceUSDPerHour != *cat.OnDemandPriceUSDPerHour {
				t.Errorf("on-demand price %v, want catalogue %v", o.PriceUSDPerHour, *cat.OnDemandPriceUSDPerHour)
			}
		case cloudprovider.CapacityTypeSpot:
			if o.PriceUSDPerHour <= 0 || o.PriceUSDPerHour >= *cat.OnDemandPriceUSDPerHour {
				t.Errorf("spot price %v not from DescribeSpotPriceHistory", o.PriceUSDPerHour)
			}
		}
	}
	if len(m5.Offerings) != 6 || len(zones) != 3 {
		t.Errorf("m5.large offerings %+v, want 3 zones × 2 capacity types", m5.Offerings)
	}
	for _, name := range []string{"g5.xlarge", "g5g.xlarge", "m6g.large", "c7i.xlarge"} {
		if find(its, name) == nil {
			t.Errorf("%s missing: every AL2023 variant should be resolved", name)
		}
	}
	// A general-purpose NodePool: c/m/r, amd64, on-demand or spot.
	n := 0
	for _, it := range its {
		if strings.Contains("cmr", it.Labels[catalog.LabelInstanceCategory]) && it.Labels[corev1.LabelArchStable] == "amd64" {
			n++
		}
	}
	if n < 100 {
		t.Errorf("only %d general-purpose amd64 types", n)
	}
}

var providerIDRe = regexp.MustCompile(`^aws:///us-east-1[abc]/i-[0-9a-f]+$`)

func TestSimCreateGetListDelete(t *testing.T) {
	e := newSimEnv(t)
	ctx := context.Background()
	nc := nodeClaim("default-abcde",
		in(corev1.LabelInstanceTypeStable, "m5.large", "m5.xlarge"),
		in(karpv1.CapacityTypeLabelKey, cloudprovider.CapacityTypeOnDemand))
	got, err := e.cp.Create(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	if !providerIDRe.MatchString(got.Status.ProviderID) {
		t.Fatalf("providerID %q", got.Status.ProviderID)
	}
	if got.Labels[corev1.LabelInstanceTypeStable] != "m5.large" || got.Labels[karpv1.CapacityTypeLabelKey] != "on-demand" ||
		got.Labels[corev1.LabelArchStable] != "amd64" || !strings.HasPrefix(got.Labels[corev1.LabelTopologyZone], "us-east-1") ||
		got.Labels["team"] != "a" || got.Status.Allocatable.Cpu().IsZero() || got.Status.Capacity.Memory().IsZero() {
		t.Errorf("bad NodeClaim: labels %v status %+v", got.Labels, got.Status)
	}
	if nc.Status.ProviderID != "" {
		t.Error("Create modified its argument")
	}
	if name := e.imageName(t, got.Status.ImageID); !strings.Contains(name, "x86_64-standard") {
		t.Errorf("m5.large booted %s", name)
	}
	insts := e.sim.Instances()
	if len(insts) != 1 {
		t.Fatalf("%d instances", len(insts))
	}
	inst := insts[0]
	if got.Status.ProviderID != fmt.Sprintf("aws:///%s/%s", inst.Zone, inst.ID) || inst.ImageID != got.Status.ImageID {
		t.Errorf("simulator has %+v", inst)
	}
	for k, v := range map[string]string{
		"karpenter.sh/nodeclaim": "default-abcde", "karpenter.sh/nodepool": "default", "karpenter.k8s.aws/ec2nodeclass": "default",
		"kubernetes.io/cluster/demo": "owned", "eks:eks-cluster-name": "demo", "Name": "default-abcde", "team": "platform",
	} {
		if inst.Tags[k] != v {
			t.Errorf("tag %s = %q, want %q", k, inst.Tags[k], v)
		}
	}

	g, err := e.cp.Get(ctx, got.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "default-abcde" || g.Status.ProviderID != got.Status.ProviderID || g.Labels[karpv1.NodePoolLabelKey] != "default" ||
		g.Labels[corev1.LabelInstanceTypeStable] != "m5.large" || g.Spec.NodeClassRef.Name != "default" {
		t.Errorf("Get = %+v", g)
	}
	list, err := e.cp.List(ctx)
	if err != nil || len(list) != 1 || list[0].Status.ProviderID != got.Status.ProviderID {
		t.Fatalf("List = %v, %v", list, err)
	}

	// Delete learns the outcome from TerminateInstances' answer: one
	// DescribeInstances before it, none after. Control: a second Delete
	// while the instance shuts down describes it and terminates nothing.
	before := e.sim.Counts()
	if err := e.cp.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	mid := e.sim.Counts()
	if d, term := mid["DescribeInstances"]-before["DescribeInstances"], mid["TerminateInstances"]-before["TerminateInstances"]; d != 1 || term != 1 {
		t.Errorf("Delete made %d DescribeInstances and %d TerminateInstances, want 1 and 1", d, term)
	}
	// (Not found once the 300-ms shutdown has passed on a slow machine.)
	if err := e.cp.Delete(ctx, got); err != nil && !cloudprovider.IsNodeClaimNotFound(err) {
		t.Fatal(err)
	}
	after := e.sim.Counts()
	if d, term := after["DescribeInstances"]-mid["DescribeInstances"], after["TerminateInstances"]-mid["TerminateInstances"]; d != 1 || term != 0 {
		t.Errorf("Delete of a shutting-down instance made %d DescribeInstances and %d TerminateInstances, want 1 and 0", d, term)
	}
	// Termination is asynchronous: Delete keeps returning nil while the
	// instance shuts down, then NodeClaimNotFound.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := e.cp.Delete(ctx, got)
		if cloudprovider.IsNodeClaimNotFound(err) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("instance never terminated")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := e.cp.Get(ctx, got.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Fatalf("Get after delete: %v", err)
	}
	if list, err := e.cp.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List after delete: %v %v", list, err)
	}
	if _, err := e.cp.Get(ctx, "aws:///us-east-1a/i-00000000000000000"); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Fatalf("Get of unknown instance: %v", err)
	}
}

func TestSimGPUAndArmGetTheirAMI(t *testing.T) {
	e := newSimEnv(t)
	for typ, want := range map[string]string{
		"g5.xlarge":  "x86_64-nvidia",
		"g5g.xlarge": "arm64-nvidia",
		"m6g.large":  "arm64-standard",
		"c7i.xlarge": "x86_64-standard",
	} {
		got, err := e.cp.Create(context.Background(), nodeClaim("nc-"+strings.ReplaceAll(typ, ".", "-"), in(corev1.LabelInstanceTypeStable, typ)))
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if name := e.imageName(t, got.Status.ImageID); !strings.Contains(name, want) {
			t.Errorf("%s booted %s, want a %s AMI", typ, name, want)
		}
	}
}

func TestSimSpotPreferredWhenAllowed(t *testing.T) {
	e := newSimEnv(t)
	got, err := e.cp.Create(context.Background(), nodeClaim("spot-1",
		in(corev1.LabelInstanceTypeStable, "m5.large", "c5.large"),
		in(karpv1.CapacityTypeLabelKey, "spot", "on-demand"),
		in(corev1.LabelTopologyZone, "us-east-1b")))
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[karpv1.CapacityTypeLabelKey] != "spot" || got.Labels[corev1.LabelTopologyZone] != "us-east-1b" {
		t.Errorf("labels %v", got.Labels)
	}
	if insts := e.sim.Instances(); insts[0].CapacityType != "spot" || insts[0].Zone != "us-east-1b" {
		t.Errorf("simulator has %+v", insts[0])
	}
}

func TestSimInsufficientCapacity(t *testing.T) {
	e := newSimEnv(t)
	ctx := context.Background()
	if err := e.sim.Faults().AddCapacity(ec2sim.CapacityFault{InstanceType: "m5.large", CapacityType: "on-demand"}); err != nil {
		t.Fatal(err)
	}
	reqs := []karpv1.NodeSelectorRequirementWithMinValues{in(corev1.LabelInstanceTypeStable, "m5.large"), in(karpv1.CapacityTypeLabelKey, "on-demand")}
	_, err := e.cp.Create(ctx, nodeClaim("ice-1", reqs...))
	var ice *cloudprovider.InsufficientCapacityError
	if !errors.As(err, &ice) {
		t.Fatalf("want InsufficientCapacityError, got %T %v", err, err)
	}
	for _, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		if !e.cp.UnavailableOfferings().IsUnavailable("m5.large", z, "on-demand") {
			t.Errorf("m5.large/%s/on-demand not marked unavailable", z)
		}
		if e.cp.UnavailableOfferings().IsUnavailable("m5.large", z, "spot") {
			t.Errorf("m5.large/%s/spot marked unavailable", z)
		}
	}
	its, err := e.cp.GetInstanceTypes(ctx, nodePool("default"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range find(its, "m5.large").Offerings {
		if o.Available != (o.CapacityType == "spot") {
			t.Errorf("offering %+v", o)
		}
	}
	// The next attempt fails fast, without calling CreateFleet.
	fleets := e.sim.Counts()["CreateFleet"]
	if _, err := e.cp.Create(ctx, nodeClaim("ice-2", reqs...)); !errors.As(err, &ice) {
		t.Fatalf("second Create: %v", err)
	}
	if e.sim.Counts()["CreateFleet"] != fleets {
		t.Error("second Create called CreateFleet for known-unavailable offerings")
	}
	// Other types still launch.
	if _, err := e.cp.Create(ctx, nodeClaim("ok-1", in(corev1.LabelInstanceTypeStable, "m5.large", "m5.xlarge"), in(karpv1.CapacityTypeLabelKey, "on-demand"))); err != nil {
		t.Fatal(err)
	}
}

func TestSimLaunchTemplateReused(t *testing.T) {
	e := newSimEnv(t)
	for i := range 10 {
		if _, err := e.cp.Create(context.Background(), nodeClaim(fmt.Sprintf("reuse-%d", i), in(corev1.LabelInstanceTypeStable, "m5.large", "c5.large"))); err != nil {
			t.Fatal(err)
		}
	}
	counts := e.sim.Counts()
	if counts["CreateLaunchTemplate"] != 1 || counts["CreateFleet"] != 10 {
		t.Errorf("CreateLaunchTemplate=%d CreateFleet=%d, want 1 and 10", counts["CreateLaunchTemplate"], counts["CreateFleet"])
	}
	if counts["DescribeLaunchTemplates"] > 1 {
		t.Errorf("DescribeLaunchTemplates=%d, want at most 1 (cached)", counts["DescribeLaunchTemplates"])
	}
	// A restarted controller (new CloudProvider, same cluster) reuses it too.
	cp2, err := New(Options{ClusterName: cluster, ClusterEndpoint: "https://api.demo.example", ClusterCABundle: "Q0E=", KubeClient: e.cp.opts.KubeClient, EC2API: e.api})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp2.Create(context.Background(), nodeClaim("reuse-after-restart", in(corev1.LabelInstanceTypeStable, "m5.large", "c5.large"))); err != nil {
		t.Fatal(err)
	}
	if c := e.sim.Counts()["CreateLaunchTemplate"]; c != 1 {
		t.Errorf("restart recreated the launch template: CreateLaunchTemplate=%d", c)
	}
}

func TestSimErrors(t *testing.T) {
	bad := defaultNodeClass()
	bad.Name = "bad-subnets"
	bad.Spec.SubnetSelectorTerms = []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "nope"}}}
	badAMI := defaultNodeClass()
	badAMI.Name = "bad-ami"
	badAMI.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "windows2022@latest"}}
	e := newSimEnv(t, defaultNodeClass(), bad, badAMI)
	ctx := context.Background()

	var notReady *cloudprovider.NodeClassNotReadyError
	_, err := e.cp.GetInstanceTypes(ctx, nodePool("bad-subnets"))
	if !errors.As(err, &notReady) || notReady.NodeClass != "bad-subnets" || !strings.Contains(err.Error(), "spec.subnetSelectorTerms matched no subnet in us-east-1") {
		t.Errorf("bad subnets: %v", err)
	}
	if _, err := e.cp.GetInstanceTypes(ctx, nodePool("bad-ami")); !errors.As(err, &notReady) || !strings.Contains(err.Error(), "spec.amiSelectorTerms") {
		t.Errorf("bad AMI: %v", err)
	}
	if _, err := e.cp.GetInstanceTypes(ctx, nodePool("missing")); !errors.As(err, &notReady) || notReady.NodeClass != "missing" {
		t.Errorf("missing class: %v", err)
	}

	reqs := in(corev1.LabelInstanceTypeStable, "m5.large")
	if err := e.sim.Faults().FailNext("CreateFleet", "InvalidParameterValue", 1); err != nil {
		t.Fatal(err)
	}
	var launchErr *cloudprovider.LaunchError
	if _, err := e.cp.Create(ctx, nodeClaim("invalid", reqs)); !errors.As(err, &launchErr) || launchErr.Code != "InvalidParameterValue" {
		t.Errorf("want LaunchError InvalidParameterValue, got %T %v", err, err)
	}
	// 5xx after the SDK's retries: transient, none of the typed errors.
	// One attempt per call, so the test does not sit through backoff.
	once, err := ec2api.New(ctx, ec2api.Config{Region: "us-east-1", BaseEndpoint: e.endpoint, RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")})
	if err != nil {
		t.Fatal(err)
	}
	cpOnce, err := New(Options{ClusterName: cluster, ClusterEndpoint: "https://api.demo.example", KubeClient: e.cp.opts.KubeClient, EC2API: once})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cpOnce.GetInstanceTypes(ctx, nodePool("default")); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.Faults().FailNext("CreateFleet", "InternalError", 1); err != nil {
		t.Fatal(err)
	}
	_, err = cpOnce.Create(ctx, nodeClaim("transient", reqs))
	var ice *cloudprovider.InsufficientCapacityError
	if err == nil || errors.As(err, &launchErr) || errors.As(err, &ice) || errors.As(err, &notReady) {
		t.Errorf("want a transient error, got %T %v", err, err)
	}
	e.sim.Faults().Clear()
	// Requirements nothing satisfies: insufficient capacity, not a crash.
	if _, err := e.cp.Create(ctx, nodeClaim("impossible", in(corev1.LabelInstanceTypeStable, "no.such"))); !errors.As(err, &ice) {
		t.Errorf("impossible requirements: %v", err)
	}
}
