package status

import (
	"context"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/karpx/karpx/apis/v1"
	awscloud "github.com/karpx/karpx/autoscaler/aws/cloudprovider"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/ec2sim"
)

const cluster = "demo"

func class(name string, mutate func(*v1.EC2NodeClass)) *v1.EC2NodeClass {
	c := &v1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 3},
		Spec: v1.EC2NodeClassSpec{
			SubnetSelectorTerms:        []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
			SecurityGroupSelectorTerms: []v1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
			AMISelectorTerms:           []v1.AMISelectorTerm{{Alias: "bottlerocket@latest"}},
			InstanceProfile:            new("KarpxNodeProfile"),
		},
	}
	if mutate != nil {
		mutate(c)
	}
	return c
}

type testEnv struct {
	kube     client.Client
	sim      *ec2sim.Simulator
	ctrl     *Controller
	recorder *record.FakeRecorder
}

func newTestEnv(t *testing.T, classes ...*v1.EC2NodeClass) *testEnv {
	t.Helper()
	env := ec2apitest.Start(t, ec2sim.Config{ClusterName: cluster, Throttle: ec2sim.ThrottleConfig{Disabled: true}},
		ec2api.Config{RetryMaxAttempts: 1})
	// The spec.instanceProfile of class(): an existing profile.
	if _, err := env.Client.CreateInstanceProfile(context.Background(), &iam.CreateInstanceProfileInput{InstanceProfileName: awssdk.String("KarpxNodeProfile")}); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1.EC2NodeClass{})
	for _, c := range classes {
		b = b.WithObjects(c)
	}
	kube := b.Build()
	cp, err := awscloud.New(awscloud.Options{ClusterName: cluster, ClusterEndpoint: "https://api.demo.example", ClusterCABundle: "Q0E=",
		Region: "us-east-1", KubeClient: kube, EC2API: env.Client})
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(10)
	return &testEnv{kube: kube, sim: env.Sim, recorder: rec, ctrl: New(kube, cp, rec, Options{})}
}

func (e *testEnv) reconcile(t *testing.T, name string) (reconcile.Result, *v1.EC2NodeClass) {
	t.Helper()
	res, err := e.ctrl.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	if err != nil {
		t.Fatal(err)
	}
	got := &v1.EC2NodeClass{}
	if err := e.kube.Get(context.Background(), types.NamespacedName{Name: name}, got); err != nil {
		t.Fatal(err)
	}
	return res, got
}

func cond(t *testing.T, c *v1.EC2NodeClass, typ string) metav1.Condition {
	t.Helper()
	got := meta.FindStatusCondition(c.Status.Conditions, typ)
	if got == nil {
		t.Fatalf("no %s condition in %+v", typ, c.Status.Conditions)
	}
	return *got
}

func TestReadyClassStatus(t *testing.T) {
	e := newTestEnv(t, class("default", nil))
	res, got := e.reconcile(t, "default")
	if res.RequeueAfter != time.Minute {
		t.Errorf("requeue after %s, want the 1m resync", res.RequeueAfter)
	}
	for _, typ := range append([]string{v1.ConditionTypeReady}, v1.ConditionTypes...) {
		if c := cond(t, got, typ); c.Status != metav1.ConditionTrue || c.ObservedGeneration != 3 {
			t.Errorf("%s = %+v, want True at generation 3", typ, c)
		}
	}
	st := got.Status
	if len(st.Subnets) == 0 || len(st.SecurityGroups) == 0 || st.InstanceProfile != "KarpxNodeProfile" {
		t.Errorf("status %+v", st)
	}
	for _, s := range st.Subnets {
		if s.ID == "" || s.Zone == "" || !strings.HasPrefix(s.ZoneID, "use1-az") {
			t.Errorf("subnet %+v", s)
		}
	}
	// bottlerocket@latest: x86_64 and arm64, standard and NVIDIA.
	variants := map[string]bool{}
	for _, a := range st.AMIs {
		arch, gpu := "", "standard"
		for _, r := range a.Requirements {
			if r.Key == "kubernetes.io/arch" {
				arch = r.Values[0]
			}
			if r.Key == "karpenter.k8s.aws/instance-gpu-count" && r.Operator == "Exists" {
				gpu = "nvidia"
			}
		}
		variants[arch+"/"+gpu] = true
	}
	if len(st.AMIs) != 4 || len(variants) != 4 {
		t.Errorf("want 4 AMIs (amd64/arm64 × standard/nvidia), got %d: %v", len(st.AMIs), variants)
	}
	select {
	case ev := <-e.recorder.Events:
		t.Errorf("unexpected event %q", ev)
	default:
	}
}

func TestNotReadyNamesTheTerm(t *testing.T) {
	e := newTestEnv(t,
		class("nosubnet", func(c *v1.EC2NodeClass) {
			c.Spec.SubnetSelectorTerms = []v1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "nope"}}, {ID: "subnet-0000000000000dead"}}
		}),
		class("nosg", func(c *v1.EC2NodeClass) {
			c.Spec.SecurityGroupSelectorTerms = []v1.SecurityGroupSelectorTerm{{Name: "no-such-group"}}
		}),
		class("noami", func(c *v1.EC2NodeClass) {
			c.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Name: "no-such-image-*"}}
			c.Spec.AMIFamily = new(v1.AMIFamilyAL2023)
		}),
		class("windows", func(c *v1.EC2NodeClass) {
			c.Spec.AMISelectorTerms = []v1.AMISelectorTerm{{Alias: "windows2022@latest"}}
		}),
		class("noprofile", func(c *v1.EC2NodeClass) { c.Spec.InstanceProfile = nil }),
		class("missingprofile", func(c *v1.EC2NodeClass) { c.Spec.InstanceProfile = new("NoSuchProfile") }),
		class("missingrole", func(c *v1.EC2NodeClass) { c.Spec.InstanceProfile = nil; c.Spec.Role = "MissingNodeRole" }),
	)
	for _, tc := range []struct {
		name, typ, reason string
		msg               []string
	}{
		{"nosubnet", v1.ConditionTypeSubnetsReady, "SubnetsNotFound", []string{`spec.subnetSelectorTerms[0] {"tags":{"karpenter.sh/discovery":"nope"}}`, `spec.subnetSelectorTerms[1] {"id":"subnet-0000000000000dead"}`, "us-east-1"}},
		{"nosg", v1.ConditionTypeSecurityGroupsReady, "SecurityGroupsNotFound", []string{`spec.securityGroupSelectorTerms[0] {"name":"no-such-group"}`}},
		{"noami", v1.ConditionTypeAMIsReady, "AMIsNotFound", []string{`spec.amiSelectorTerms[0] {"name":"no-such-image-*"}`}},
		{"windows", v1.ConditionTypeAMIsReady, "AMISelectorInvalid", []string{"Windows2022", "not supported"}},
		{"noprofile", v1.ConditionTypeInstanceProfileReady, "InstanceProfileUnset", []string{"spec.role", "spec.instanceProfile"}},
		{"missingprofile", v1.ConditionTypeInstanceProfileReady, "InstanceProfileNotFound", []string{`spec.instanceProfile "NoSuchProfile"`, "create it"}},
		{"missingrole", v1.ConditionTypeInstanceProfileReady, "RoleNotFound", []string{`spec.role "MissingNodeRole"`, "create the role", "fix spec.role"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got := e.reconcile(t, tc.name)
			c := cond(t, got, tc.typ)
			if c.Status != metav1.ConditionFalse || c.Reason != tc.reason {
				t.Errorf("%s = %+v, want False/%s", tc.typ, c, tc.reason)
			}
			for _, m := range tc.msg {
				if !strings.Contains(c.Message, m) {
					t.Errorf("%s message %q lacks %q", tc.typ, c.Message, m)
				}
			}
			ready := cond(t, got, v1.ConditionTypeReady)
			if ready.Status != metav1.ConditionFalse || ready.Reason != ReasonNotReady || !strings.Contains(ready.Message, tc.typ+"=False") {
				t.Errorf("Ready = %+v", ready)
			}
			select {
			case ev := <-e.recorder.Events:
				if !strings.Contains(ev, "Warning "+EventNodeClassNotReady) || !strings.Contains(ev, tc.typ) {
					t.Errorf("event %q", ev)
				}
			default:
				t.Error("no NodeClassNotReady event")
			}
			// A second pass with the same result records no new event.
			e.reconcile(t, tc.name)
			select {
			case ev := <-e.recorder.Events:
				t.Errorf("repeated event %q", ev)
			default:
			}
		})
	}
}

// TestTransientFailureKeepsStatus: an AWS failure after a good resolution
// keeps the last status (no condition turns False) and backs off.
func TestTransientFailureKeepsStatus(t *testing.T) {
	e := newTestEnv(t, class("default", nil))
	_, good := e.reconcile(t, "default")
	// A new term forces a new resolution (the cache is keyed by terms).
	good.Spec.SubnetSelectorTerms = append(good.Spec.SubnetSelectorTerms, v1.SubnetSelectorTerm{ID: "subnet-0000000000000beef"})
	if err := e.kube.Update(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.Faults().FailNext("DescribeSubnets", "InternalError", 10); err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	for range 3 {
		res, got := e.reconcile(t, "default")
		waits = append(waits, res.RequeueAfter)
		for _, typ := range append([]string{v1.ConditionTypeReady}, v1.ConditionTypes...) {
			if c := cond(t, got, typ); c.Status != metav1.ConditionTrue {
				t.Errorf("%s = %+v after a transient failure, want the last True kept", typ, c)
			}
		}
		if len(got.Status.Subnets) == 0 {
			t.Error("subnets dropped after a transient failure")
		}
	}
	if waits[0] != time.Second || waits[1] != 2*time.Second || waits[2] != 4*time.Second {
		t.Errorf("backoff %v, want 1s 2s 4s", waits)
	}
}

// TestFirstResolutionTransient: before any resolution, a transient failure
// leaves the conditions Unknown (never False).
func TestFirstResolutionTransient(t *testing.T) {
	e := newTestEnv(t, class("default", nil))
	if err := e.sim.Faults().FailNext("DescribeSubnets", "InternalError", 1); err != nil {
		t.Fatal(err)
	}
	_, got := e.reconcile(t, "default")
	for _, typ := range append([]string{v1.ConditionTypeReady}, v1.ConditionTypes...) {
		if c := cond(t, got, typ); c.Status != metav1.ConditionUnknown || c.Reason != ReasonResolving {
			t.Errorf("%s = %+v, want Unknown/Resolving", typ, c)
		}
	}
	_, got = e.reconcile(t, "default")
	if c := cond(t, got, v1.ConditionTypeReady); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready after recovery = %+v", c)
	}
}

// TestRoleGetsInstanceProfile: for spec.role, the class's instance profile
// is created in IAM holding the role and reported in
// status.instanceProfile; InstanceProfileReady and Ready are True.
func TestRoleGetsInstanceProfile(t *testing.T) {
	e := newTestEnv(t, class("withrole", func(c *v1.EC2NodeClass) { c.Spec.InstanceProfile = nil; c.Spec.Role = "KarpenterNodeRole-demo" }))
	_, got := e.reconcile(t, "withrole")
	for _, typ := range []string{v1.ConditionTypeInstanceProfileReady, v1.ConditionTypeReady} {
		if c := cond(t, got, typ); c.Status != metav1.ConditionTrue {
			t.Errorf("%s = %+v, want True", typ, c)
		}
	}
	var found bool
	for _, p := range e.sim.InstanceProfiles() {
		if p.Name == got.Status.InstanceProfile {
			found = len(p.Roles) == 1 && p.Roles[0] == "KarpenterNodeRole-demo" && p.Tags["karpenter.k8s.aws/ec2nodeclass"] == "withrole"
		}
	}
	if !strings.HasPrefix(got.Status.InstanceProfile, cluster+"_") || !found {
		t.Errorf("status.instanceProfile %q, simulated profiles %+v", got.Status.InstanceProfile, e.sim.InstanceProfiles())
	}
}
