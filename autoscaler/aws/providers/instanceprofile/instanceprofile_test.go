package instanceprofile

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/go-logr/logr"

	"github.com/karpx/karpx/autoscaler/aws/cache"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/ec2sim"
)

func newEnv(t *testing.T, ttls cache.TTLs) (*Provider, *ec2apitest.Env) {
	t.Helper()
	env := ec2apitest.Start(t, ec2sim.Config{ClusterName: "demo", IAMRoles: []string{"OtherRole"}, Throttle: ec2sim.ThrottleConfig{Disabled: true}},
		ec2api.Config{RetryMaxAttempts: 1})
	return NewProvider(env.Client, "demo", "us-east-1", logr.Discard(), ttls), env
}

func reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// TestEnsureCreatesTagsCachesAndReplacesRole: the first Ensure creates a
// tagged profile under the cluster's path with the role; the next is
// served from the cache; a changed role replaces the old one; classes get
// distinct, stable names.
func TestEnsureCreatesTagsCachesAndReplacesRole(t *testing.T) {
	p, env := newEnv(t, cache.DefaultTTLs())
	ctx := context.Background()
	name := p.Name("default")
	if name != p.Name("default") || name == p.Name("gpu") || !strings.HasPrefix(name, "demo_") || len(name) != len("demo_")+hashLength {
		t.Fatalf("names %q %q", name, p.Name("gpu"))
	}
	prof, err := p.Ensure(ctx, "default", "KarpenterNodeRole-demo")
	if err != nil {
		t.Fatal(err)
	}
	if prof.Name != name || prof.ARN != "arn:aws:iam::123456789012:instance-profile/karpx/us-east-1/demo/"+name {
		t.Fatalf("profile %+v", prof)
	}
	sims := env.Sim.InstanceProfiles()
	if len(sims) != 1 || len(sims[0].Roles) != 1 || sims[0].Roles[0] != "KarpenterNodeRole-demo" ||
		sims[0].Tags["kubernetes.io/cluster/demo"] != "owned" || sims[0].Tags["karpenter.k8s.aws/ec2nodeclass"] != "default" ||
		sims[0].Tags["eks:eks-cluster-name"] != "demo" || sims[0].Tags[TagRegion] != "us-east-1" {
		t.Fatalf("simulated profiles %+v", sims)
	}
	gets := env.Sim.Counts()["GetInstanceProfile"]
	if _, err := p.Ensure(ctx, "default", "KarpenterNodeRole-demo"); err != nil {
		t.Fatal(err)
	}
	if env.Sim.Counts()["GetInstanceProfile"] != gets {
		t.Fatal("a second Ensure with the same role called IAM; want the cached profile")
	}
	if _, err := p.Ensure(ctx, "default", "OtherRole"); err != nil {
		t.Fatal(err)
	}
	if sims := env.Sim.InstanceProfiles(); len(sims) != 1 || len(sims[0].Roles) != 1 || sims[0].Roles[0] != "OtherRole" {
		t.Fatalf("after a role change %+v", sims)
	}
}

// TestEnsureErrors: a missing role and IAM's AccessDenied are *Error naming
// spec.role and the fix; a 5xx is transient (not *Error).
func TestEnsureErrors(t *testing.T) {
	p, env := newEnv(t, cache.NoCaching())
	ctx := context.Background()
	_, err := p.Ensure(ctx, "default", "MissingRole")
	if reason(err) != ReasonRoleNotFound || !strings.Contains(err.Error(), `spec.role "MissingRole"`) || !strings.Contains(err.Error(), "create the role") {
		t.Fatalf("missing role: %v", err)
	}
	if err := env.Sim.Faults().Add(ec2sim.FaultRule{Action: "GetInstanceProfile", Code: "AccessDenied", Message: "User is not authorized to perform: iam:GetInstanceProfile", Count: 1}); err != nil {
		t.Fatal(err)
	}
	_, err = p.Ensure(ctx, "other", "KarpenterNodeRole-demo")
	if reason(err) != ReasonAccessDenied || !strings.Contains(err.Error(), "iam-policy.json") {
		t.Fatalf("access denied: %v", err)
	}
	if err := env.Sim.Faults().Add(ec2sim.FaultRule{Action: "GetInstanceProfile", Code: "ServiceFailure", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err = p.Ensure(ctx, "other", "KarpenterNodeRole-demo"); err == nil || reason(err) != "" {
		t.Fatalf("5xx should be transient: %v", err)
	}
	if _, err := p.Ensure(ctx, "other", "KarpenterNodeRole-demo"); err != nil {
		t.Fatalf("after the faults: %v", err)
	}
}

// TestGetAndDelete: spec.instanceProfile is verified by name; Delete
// removes the class's profile once, and leaves a profile of that name
// without this cluster's ownership tag alone.
func TestGetAndDelete(t *testing.T) {
	p, env := newEnv(t, cache.DefaultTTLs())
	ctx := context.Background()
	api := env.Client
	if _, err := api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("Existing")}); err != nil {
		t.Fatal(err)
	}
	if prof, err := p.Get(ctx, "Existing"); err != nil || prof.ARN != "arn:aws:iam::123456789012:instance-profile/Existing" {
		t.Fatalf("Get existing: %+v %v", prof, err)
	}
	if _, err := p.Get(ctx, "Absent"); reason(err) != ReasonInstanceProfileNotFound || !strings.Contains(err.Error(), `spec.instanceProfile "Absent"`) {
		t.Fatalf("Get absent: %v", err)
	}
	if _, err := p.Ensure(ctx, "default", "KarpenterNodeRole-demo"); err != nil {
		t.Fatal(err)
	}
	if deleted, err := p.Delete(ctx, "default"); err != nil || !deleted {
		t.Fatalf("Delete: %v %v", deleted, err)
	}
	if deleted, err := p.Delete(ctx, "default"); err != nil || deleted {
		t.Fatalf("second Delete: %v %v", deleted, err)
	}
	if sims := env.Sim.InstanceProfiles(); len(sims) != 1 || sims[0].Name != "Existing" {
		t.Fatalf("profiles left %+v", sims)
	}
	// A profile with the class's name that this cluster does not own.
	foreign := p.Name("foreign")
	if _, err := api.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(foreign)}); err != nil {
		t.Fatal(err)
	}
	if deleted, err := p.Delete(ctx, "foreign"); err != nil || deleted {
		t.Fatalf("Delete of a foreign profile: %v %v", deleted, err)
	}
	if _, err := p.Ensure(ctx, "foreign", "KarpenterNodeRole-demo"); reason(err) != ReasonNameTaken {
		t.Fatalf("Ensure over a foreign profile: %v", err)
	}
}
