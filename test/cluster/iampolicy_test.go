package cluster

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
)

// impliedActions are the IAM actions an API call needs besides its own.
// Source: Amazon EC2 User Guide, "EC2 Fleet prerequisites" (a CreateFleet
// of type instant launches through RunInstances and needs ec2:RunInstances
// on the instances, volumes, network interfaces and the launch template).
var impliedActions = map[string][]string{"ec2:CreateFleet": {"ec2:RunInstances"}}

// otherServiceActions are the only actions the policy may grant that the
// code does not call: passing the EC2NodeClass's node role to instances and
// to its instance profile (Amazon EC2 User Guide, "IAM roles for Amazon
// EC2": launching with an instance profile, and AddRoleToInstanceProfile,
// need iam:PassRole).
var otherServiceActions = []string{"iam:PassRole"}

// sharedResourceTypes are the EC2 resource types launches use without
// owning them (AMIs, their snapshots, subnets, security groups, capacity
// reservations): statements on them alone need no cluster-tag condition.
var sharedResourceTypes = []string{"image", "snapshot", "security-group", "subnet", "capacity-reservation"}

type policyStatement struct {
	Sid       string
	Effect    string
	Action    stringOrList
	Resource  stringOrList
	Condition map[string]map[string]json.RawMessage
}

type stringOrList []string

func (s *stringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = []string{one}
		return nil
	}
	var many []string
	err := json.Unmarshal(b, &many)
	*s = many
	return err
}

func readPolicy(t *testing.T) []policyStatement {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(manifestsDir(t), "controller", "iam-policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Version   string
		Statement []policyStatement
	}
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatalf("iam-policy.json: %v", err)
	}
	if p.Version != "2012-10-17" {
		t.Errorf("policy Version %q, want 2012-10-17", p.Version)
	}
	return p.Statement
}

// calledActions returns the IAM actions of every method of ec2api.API,
// ec2api.IAMAPI and ec2api.SQSAPI, the controller's only ways to EC2, SSM,
// IAM and SQS ("ec2:CreateFleet", "iam:CreateInstanceProfile",
// "sqs:ReceiveMessage", …), with impliedActions added, sorted.
func calledActions() []string {
	var actions []string
	for _, api := range []reflect.Type{reflect.TypeFor[ec2api.API](), reflect.TypeFor[ec2api.IAMAPI](), reflect.TypeFor[ec2api.SQSAPI]()} {
		for i := range api.NumMethod() {
			m := api.Method(i)
			// (ctx, *service.XInput, ...optFns): the input's package names the service.
			service := path.Base(m.Type.In(1).Elem().PkgPath())
			a := service + ":" + m.Name
			actions = append(actions, a)
			actions = append(actions, impliedActions[a]...)
		}
	}
	slices.Sort(actions)
	return slices.Compact(actions)
}

// TestIAMPolicyActions: every EC2, SSM and IAM action the code calls is in
// manifests/controller/iam-policy.json and nothing else is, but for
// otherServiceActions.
func TestIAMPolicyActions(t *testing.T) {
	want := calledActions()
	if !slices.Contains(want, "ec2:CreateFleet") || !slices.Contains(want, "ssm:GetParameter") || !slices.Contains(want, "iam:CreateInstanceProfile") || !slices.Contains(want, "sqs:ReceiveMessage") {
		t.Fatalf("actions from ec2api.API look wrong: %v", want)
	}
	var granted []string
	for _, s := range readPolicy(t) {
		if s.Effect != "Allow" {
			continue
		}
		granted = append(granted, s.Action...)
	}
	slices.Sort(granted)
	granted = slices.Compact(granted)
	for _, a := range granted {
		if strings.Contains(a, "*") {
			t.Errorf("wildcard action %q", a)
		}
		if !slices.Contains(want, a) && !slices.Contains(otherServiceActions, a) {
			t.Errorf("policy grants %s, which the controller never calls", a)
		}
	}
	for _, a := range want {
		if !slices.Contains(granted, a) {
			t.Errorf("the controller calls %s (ec2api.API, ec2api.IAMAPI or ec2api.SQSAPI) but the policy does not grant it", a)
		}
	}
}

// TestIAMPolicyScoped: mutating EC2 actions are granted only on shared
// resource types or under a kubernetes.io/cluster/${CLUSTER_NAME} tag
// condition; mutating IAM actions (but iam:PassRole) only under that tag
// condition and on instance profiles below the cluster's IAM path; reads
// are limited to the cluster's region (EC2) or to instance profiles (IAM).
func TestIAMPolicyScoped(t *testing.T) {
	for _, s := range readPolicy(t) {
		cond, _ := json.Marshal(s.Condition)
		clusterScoped := strings.Contains(string(cond), "Tag/kubernetes.io/cluster/${CLUSTER_NAME}")
		for _, a := range s.Action {
			read := strings.HasPrefix(a, "ec2:Describe") || strings.HasPrefix(a, "ssm:Get") || strings.HasPrefix(a, "iam:Get")
			switch {
			case strings.HasPrefix(a, "sqs:"):
				// The interruption queue only, by its ARN.
				if len(s.Resource) != 1 || s.Resource[0] != "arn:${AWS_PARTITION}:sqs:${AWS_REGION}:${AWS_ACCOUNT_ID}:${INTERRUPTION_QUEUE}" {
					t.Errorf("%s: %s on %v, want only the interruption queue arn:${AWS_PARTITION}:sqs:${AWS_REGION}:${AWS_ACCOUNT_ID}:${INTERRUPTION_QUEUE}", s.Sid, a, s.Resource)
				}
			case read && strings.HasPrefix(a, "iam:"):
				for _, r := range s.Resource {
					if !strings.Contains(r, ":instance-profile/") {
						t.Errorf("%s: %s on %s, want instance profiles only", s.Sid, a, r)
					}
				}
			case strings.HasPrefix(a, "iam:") && a != "iam:PassRole":
				if !clusterScoped {
					t.Errorf("%s: %s without the cluster tag condition", s.Sid, a)
				}
				for _, r := range s.Resource {
					if !strings.HasSuffix(r, ":instance-profile/karpx/${AWS_REGION}/${CLUSTER_NAME}/*") {
						t.Errorf("%s: %s on %s, want the cluster's instance-profile path /karpx/${AWS_REGION}/${CLUSTER_NAME}/", s.Sid, a, r)
					}
				}
			case read && slices.Contains(s.Resource, "*") && !strings.Contains(string(cond), "aws:RequestedRegion"):
				t.Errorf("%s: %s on every resource of every region", s.Sid, a)
			case !read && strings.HasPrefix(a, "ec2:") && !clusterScoped:
				for _, r := range s.Resource {
					if r == "*" || !slices.ContainsFunc(sharedResourceTypes, func(rt string) bool { return strings.Contains(r, ":"+rt+"/") }) {
						t.Errorf("%s: %s on %s without the cluster tag condition", s.Sid, a, r)
					}
				}
			}
		}
	}
}

// TestEC2OnlyThroughAPI backs calledActions: no non-test code outside
// package ec2api (and the simulator, which serves EC2) builds its own EC2
// or SSM client, so ec2api.API lists every call.
func TestEC2OnlyThroughAPI(t *testing.T) {
	root := filepath.Dir(manifestsDir(t))
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			switch rel {
			case "ec2sim", "hack", "bin", "_output", ".git", filepath.Join("autoscaler", "aws", "ec2api"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		aliases := map[string]bool{}
		for _, imp := range f.Imports {
			ip := strings.Trim(imp.Path.Value, `"`)
			if ip == "github.com/aws/aws-sdk-go-v2/service/ec2" || ip == "github.com/aws/aws-sdk-go-v2/service/ssm" || ip == "github.com/aws/aws-sdk-go-v2/service/iam" || ip == "github.com/aws/aws-sdk-go-v2/service/sqs" {
				name := path.Base(ip)
				if imp.Name != nil {
					name = imp.Name.Name
				}
				aliases[name] = true
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && aliases[x.Name] && (sel.Sel.Name == "New" || sel.Sel.Name == "NewFromConfig") {
				t.Errorf("%s: %s.%s: EC2/SSM/IAM/SQS calls must go through ec2api.API, ec2api.IAMAPI or ec2api.SQSAPI so the IAM policy test sees them", fset.Position(sel.Pos()), x.Name, sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
