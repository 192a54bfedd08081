package ec2sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"
)

func (e *testEnv) iamClient() *iam.Client {
	return iam.NewFromConfig(awsConfig(), func(o *iam.Options) {
		o.BaseEndpoint = aws.String(e.endpoint)
		o.Retryer = newRetryer(1)
	})
}

func apiCode(t *testing.T, err error) string {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an API error", err)
	}
	return ae.ErrorCode()
}

// TestIAMInstanceProfileLifecycle drives the instance-profile actions with
// the real IAM SDK client: create with tags, add a role, get, the errors
// IAM answers (duplicate, second role, unknown role, delete with a role),
// tag, remove the role, delete.
func TestIAMInstanceProfileLifecycle(t *testing.T) {
	env := newTestEnv(t, Config{IAMRoles: []string{"CustomRole"}})
	c := env.iamClient()
	ctx := context.Background()
	name := "karpx_0123"
	out, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name), Path: aws.String("/karpx/us-east-1/demo/"),
		Tags: []iamtypes.Tag{{Key: aws.String("kubernetes.io/cluster/demo"), Value: aws.String("owned")}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(out.InstanceProfile.Arn); got != "arn:aws:iam::123456789012:instance-profile/karpx/us-east-1/demo/karpx_0123" {
		t.Fatalf("arn %q", got)
	}
	if !strings.HasPrefix(aws.ToString(out.InstanceProfile.InstanceProfileId), "AIPA") || len(out.InstanceProfile.Roles) != 0 || len(out.InstanceProfile.Tags) != 1 {
		t.Fatalf("profile %+v", out.InstanceProfile)
	}
	if _, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name)}); apiCode(t, err) != "EntityAlreadyExists" {
		t.Fatalf("duplicate create: %v", err)
	}
	_, err = c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String("NoSuchRole")})
	var nse *iamtypes.NoSuchEntityException
	if !errors.As(err, &nse) || !strings.Contains(err.Error(), "NoSuchRole") {
		t.Fatalf("unknown role: %v", err)
	}
	// Default pattern KarpenterNodeRole-* and Config.IAMRoles both exist.
	if _, err := c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String("KarpenterNodeRole-demo")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String("CustomRole")}); apiCode(t, err) != "LimitExceeded" {
		t.Fatalf("second role: %v", err)
	}
	got, err := c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.InstanceProfile.Roles) != 1 || aws.ToString(got.InstanceProfile.Roles[0].RoleName) != "KarpenterNodeRole-demo" ||
		aws.ToString(got.InstanceProfile.Roles[0].Arn) != "arn:aws:iam::123456789012:role/KarpenterNodeRole-demo" {
		t.Fatalf("roles %+v", got.InstanceProfile.Roles)
	}
	if _, err := c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); apiCode(t, err) != "DeleteConflict" {
		t.Fatalf("delete with a role: %v", err)
	}
	if _, err := c.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String(name),
		Tags: []iamtypes.Tag{{Key: aws.String("karpenter.k8s.aws/ec2nodeclass"), Value: aws.String("default")}}}); err != nil {
		t.Fatal(err)
	}
	snap := env.sim.InstanceProfiles()
	if len(snap) != 1 || snap[0].Tags["karpenter.k8s.aws/ec2nodeclass"] != "default" || snap[0].Tags["kubernetes.io/cluster/demo"] != "owned" {
		t.Fatalf("snapshot %+v", snap)
	}
	if _, err := c.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String("KarpenterNodeRole-demo")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if !errors.As(err, &nse) {
		t.Fatalf("get after delete: %v", err)
	}
	if _, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("bad name")}); apiCode(t, err) != "ValidationError" {
		t.Fatalf("bad name: %v", err)
	}
}

// TestIAMRolesAdminAndFaults: roles removed through the admin endpoint stop
// existing even when the default pattern matches them; an injected
// AccessDenied reaches the client with IAM's code and status 403.
func TestIAMRolesAdminAndFaults(t *testing.T) {
	env := newTestEnv(t, Config{})
	c := env.iamClient()
	ctx := context.Background()
	req, _ := http.NewRequest(http.MethodDelete, env.endpoint+"/_sim/iam/roles?name=KarpenterNodeRole-gone", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = http.Post(env.endpoint+"/_sim/iam/roles", "application/json", strings.NewReader(`{"name":"OtherRole"}`))
	if err != nil {
		t.Fatal(err)
	}
	var listed map[string][]string
	_ = json.NewDecoder(resp.Body).Decode(&listed)
	resp.Body.Close()
	if len(listed["roles"]) != 1 || listed["roles"][0] != "OtherRole" || listed["patterns"][0] != "KarpenterNodeRole-*" {
		t.Fatalf("roles %v", listed)
	}
	if env.sim.RoleExists("KarpenterNodeRole-gone") || !env.sim.RoleExists("KarpenterNodeRole-demo") || !env.sim.RoleExists("OtherRole") || env.sim.RoleExists("Missing") {
		t.Fatal("role existence does not follow the admin calls and the pattern")
	}
	if _, err := c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("p")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("p"), RoleName: aws.String("KarpenterNodeRole-gone")}); apiCode(t, err) != "NoSuchEntity" {
		t.Fatalf("removed role: %v", err)
	}
	if err := env.sim.Faults().Add(FaultRule{Action: "GetInstanceProfile", Code: "AccessDenied", Message: "not authorized to perform: iam:GetInstanceProfile", Count: 1}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("p")})
	var re interface{ HTTPStatusCode() int }
	if apiCode(t, err) != "AccessDenied" || !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusForbidden {
		t.Fatalf("injected AccessDenied: %v", err)
	}
	if st := env.sim.Stats()["GetInstanceProfile"]; st.Requests != 1 || st.Errors != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestLaunchRecordsInstanceProfile: an instance launched from a launch
// template with IamInstanceProfile.Name carries that profile in
// Instances(); one without has none.
func TestLaunchRecordsInstanceProfile(t *testing.T) {
	env := newTestEnv(t, Config{Throttle: ThrottleConfig{Disabled: true}})
	ctx := context.Background()
	img := env.al2023(t, "x86_64")
	for _, tc := range []struct{ lt, profile string }{{"with-profile", "karpx_profile"}, {"without-profile", ""}} {
		data := &ec2types.RequestLaunchTemplateData{ImageId: aws.String(img)}
		if tc.profile != "" {
			data.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(tc.profile)}
		}
		if _, err := env.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(tc.lt), LaunchTemplateData: data}); err != nil {
			t.Fatal(err)
		}
		out, err := env.ec2.CreateFleet(ctx, fleetInput(tc.lt, ec2types.DefaultTargetCapacityTypeOnDemand, 1, nil, ov("m5.large", "")))
		if err != nil || len(out.Instances) != 1 {
			t.Fatalf("CreateFleet: %v %+v", err, out)
		}
		id := out.Instances[0].InstanceIds[0]
		found := false
		for _, in := range env.sim.Instances() {
			if in.ID == id {
				found = true
				if in.IAMInstanceProfile != tc.profile {
					t.Fatalf("%s: instance profile %q, want %q", tc.lt, in.IAMInstanceProfile, tc.profile)
				}
			}
		}
		if !found {
			t.Fatalf("%s: instance %s not in Instances()", tc.lt, id)
		}
	}
}

// TestIAMActionsHaveNoDefaultBucket: IAM publishes no request rates, so
// DefaultRefillRate reports no bucket for IAM actions.
func TestIAMActionsHaveNoDefaultBucket(t *testing.T) {
	for _, a := range IAMActions() {
		if r, ok := DefaultRefillRate(a); ok || r != 0 {
			t.Errorf("DefaultRefillRate(%s) = %v, %v; want 0, false", a, r, ok)
		}
	}
}
