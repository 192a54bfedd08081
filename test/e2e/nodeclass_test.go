package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/ec2sim"
)

// nodeClassManifests: a pool whose EC2NodeClass matches no subnet and a
// pool whose EC2NodeClass names a role that does not exist, beside
// Karpenter's general-purpose example.
func nodeClassManifests(cluster string) string {
	pool := func(name, class string) string {
		return nodePool{Name: name, NodeClass: class, Labels: map[string]string{"pool": name}, CapacityTypes: []string{onDemand}}.yaml()
	}
	return manifests(
		nodeClass{Name: "nosubnet", Role: "KarpenterNodeRole-karpx", SubnetTags: map[string]string{"karpenter.sh/discovery": "nope"}}.yaml(cluster),
		pool("broken", "nosubnet"),
		nodeClass{Name: "norole", Role: "MissingNodeRole"}.yaml(cluster),
		pool("norole", "norole"))
}

// TestNodeClassStatusReadinessAndFinalizer: on the real API server, an
// EC2NodeClass gets Karpenter v1's status, with the instance profile karpx
// created for its spec.role, which every instance it launches carries; a
// class matching no subnet is Ready=False naming the term, its NodePool
// NodeClassReady=False with an event and no NodeClaim, kubectl karpx
// status shows READY False for it, and a pod only that NodePool can take
// gets a FailedProvisioning event naming that cause first; a class whose
// role does not exist is InstanceProfileReady=False naming spec.role and
// launches nothing; deleting a class waits for its NodeClaims, then
// removes its launch templates and its instance profile.
func TestNodeClassStatusReadinessAndFinalizer(t *testing.T) {
	e := newEnv(t, "karpx-nodeclass")
	e.applyExample("general-purpose.yaml")
	e.apply(nodeClassManifests(e.name))
	good := deployment("good", 1, "500m", "512Mi")
	bad := deployment("bad", 1, "500m", "512Mi")
	bad.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "broken"}
	noRole := deployment("norole", 1, "500m", "512Mi")
	noRole.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "norole"}
	for _, d := range []client.Object{good, bad, noRole} {
		if err := e.kube.Create(e.ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually(90*time.Second, "the good pod Running", func(ctx context.Context) (bool, error) {
		return countRunning(ctx, e.kube, "good") == 1, nil
	})

	var cls v1.EC2NodeClass
	if err := e.kube.Get(e.ctx, types.NamespacedName{Name: "default"}, &cls); err != nil {
		t.Fatal(err)
	}
	st := cls.Status
	if len(st.Subnets) != 3 || len(st.SecurityGroups) != 1 || len(st.AMIs) != 5 || st.Subnets[0].ZoneID == "" || len(st.AMIs[0].Requirements) == 0 {
		t.Errorf("default class status: %+v", st)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionTypeReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("default class Ready = %+v", c)
	}
	if len(cls.Finalizers) != 1 || cls.Finalizers[0] != v1.TerminationFinalizer {
		t.Errorf("default class finalizers %v", cls.Finalizers)
	}
	// spec.role: karpx's instance profile holds the role, and the class's
	// instances launched with it.
	profile := st.InstanceProfile
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionTypeInstanceProfileReady); profile == "" || c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("default class status.instanceProfile %q, InstanceProfileReady %+v", profile, c)
	}
	if p := simProfile(e, profile); p == nil || len(p.Roles) != 1 || p.Roles[0] != "KarpenterNodeRole-"+e.name {
		t.Errorf("instance profile %q in IAM: %+v", profile, p)
	}
	launched := 0
	for _, in := range e.sim.Instances() {
		if in.Tags["karpenter.k8s.aws/ec2nodeclass"] != "default" {
			continue
		}
		launched++
		if in.IAMInstanceProfile != profile {
			t.Errorf("instance %s launched with instance profile %q, want %q", in.ID, in.IAMInstanceProfile, profile)
		}
	}
	if launched == 0 {
		t.Error("no instance of the default class")
	}

	var badCls v1.EC2NodeClass
	e.eventually(30*time.Second, "nosubnet SubnetsReady=False", func(ctx context.Context) (bool, error) {
		if err := e.kube.Get(ctx, types.NamespacedName{Name: "nosubnet"}, &badCls); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(badCls.Status.Conditions, v1.ConditionTypeSubnetsReady)
		return c != nil && c.Status == metav1.ConditionFalse, nil
	})
	c := meta.FindStatusCondition(badCls.Status.Conditions, v1.ConditionTypeSubnetsReady)
	if c.Reason != "SubnetsNotFound" || !strings.Contains(c.Message, `spec.subnetSelectorTerms[0] {"tags":{"karpenter.sh/discovery":"nope"}}`) {
		t.Errorf("SubnetsReady = %+v", c)
	}
	var pool karpv1.NodePool
	e.eventually(30*time.Second, "broken NodeClassReady=False", func(ctx context.Context) (bool, error) {
		if err := e.kube.Get(ctx, types.NamespacedName{Name: "broken"}, &pool); err != nil {
			return false, err
		}
		return pool.StatusConditions().Get(karpv1.ConditionTypeNodeClassReady).IsFalse(), nil
	})
	e.eventually(30*time.Second, "a NodeClassNotReady event on the NodePool", func(ctx context.Context) (bool, error) {
		var evs corev1.EventList
		if err := e.kube.List(ctx, &evs); err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == "NodePool" && ev.InvolvedObject.Name == "broken" && ev.Reason == "NodeClassNotReady" && strings.Contains(ev.Message, "subnetSelectorTerms[0]") {
				return true, nil
			}
		}
		return false, nil
	})
	// The bad pod only the broken pool could take: that pool's cause
	// comes first, the other pools' mismatches after.
	var failed string
	e.eventually(30*time.Second, "a FailedProvisioning event naming the broken pool's cause first", func(ctx context.Context) (bool, error) {
		var evs corev1.EventList
		if err := e.kube.List(ctx, &evs, client.InNamespace("default")); err != nil {
			return false, err
		}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == "Pod" && strings.HasPrefix(ev.InvolvedObject.Name, "bad-") && ev.Reason == "FailedProvisioning" {
				failed = ev.Message
				const first = `karpx cannot launch a node for this pod: NodePool "broken" cannot launch nodes: `
				if strings.HasPrefix(ev.Message, first) && strings.Contains(ev.Message, "subnetSelectorTerms[0]") {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if i, j := strings.Index(failed, `"broken"`), strings.Index(failed, `"general-purpose"`); j >= 0 && j < i {
		t.Errorf("FailedProvisioning names general-purpose before broken: %q", failed)
	}
	// A role that does not exist: InstanceProfileReady=False naming
	// spec.role and the fix, Ready=False, nothing launched.
	var noRoleCls v1.EC2NodeClass
	e.eventually(30*time.Second, "norole InstanceProfileReady=False", func(ctx context.Context) (bool, error) {
		if err := e.kube.Get(ctx, types.NamespacedName{Name: "norole"}, &noRoleCls); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(noRoleCls.Status.Conditions, v1.ConditionTypeInstanceProfileReady)
		return c != nil && c.Status == metav1.ConditionFalse, nil
	})
	if c := meta.FindStatusCondition(noRoleCls.Status.Conditions, v1.ConditionTypeInstanceProfileReady); c.Reason != "RoleNotFound" ||
		!strings.Contains(c.Message, `spec.role "MissingNodeRole"`) || !strings.Contains(c.Message, "create the role") {
		t.Errorf("norole InstanceProfileReady = %+v", c)
	}
	if c := meta.FindStatusCondition(noRoleCls.Status.Conditions, v1.ConditionTypeReady); c == nil || c.Status != metav1.ConditionFalse || noRoleCls.Status.InstanceProfile != "" {
		t.Errorf("norole Ready = %+v, status.instanceProfile %q", c, noRoleCls.Status.InstanceProfile)
	}
	var noRolePool karpv1.NodePool
	e.eventually(30*time.Second, "norole NodeClassReady=False naming spec.role", func(ctx context.Context) (bool, error) {
		if err := e.kube.Get(ctx, types.NamespacedName{Name: "norole"}, &noRolePool); err != nil {
			return false, err
		}
		c := noRolePool.StatusConditions().Get(karpv1.ConditionTypeNodeClassReady)
		return c.IsFalse() && strings.Contains(c.Message, `spec.role "MissingNodeRole"`), nil
	})
	var claims karpv1.NodeClaimList
	for _, pool := range []string{"broken", "norole"} {
		if err := e.kube.List(e.ctx, &claims, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil || len(claims.Items) != 0 {
			t.Errorf("NodeClaims of the %s pool: %d, %v", pool, len(claims.Items), err)
		}
	}
	for _, in := range e.sim.Instances() {
		if in.Tags["karpenter.k8s.aws/ec2nodeclass"] == "norole" {
			t.Errorf("instance %s launched for the class whose role does not exist", in.ID)
		}
	}

	path := buildPlugin(t, e.root)
	out := e.kubectlWithPath(path, "karpx", "status", "--no-headers")
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 7 && f[0] == "broken" && f[5] != "False" {
			t.Errorf("kubectl karpx status READY of broken = %s:\n%s", f[5], out)
		}
		if len(f) >= 7 && f[0] == "general-purpose" && (f[5] != "True" || f[2] != "1") {
			t.Errorf("kubectl karpx status general-purpose: %q", l)
		}
	}

	// Deleting the class waits for its NodeClaim, then removes its
	// launch templates.
	if err := e.kube.Delete(e.ctx, &cls); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := e.kube.Get(e.ctx, types.NamespacedName{Name: "default"}, &cls); err != nil {
		t.Fatalf("class gone while its NodeClaim runs: %v", err)
	}
	if err := e.kube.Delete(e.ctx, good); err != nil {
		t.Fatal(err)
	}
	if err := e.kube.DeleteAllOf(e.ctx, &karpv1.NodeClaim{}, client.MatchingLabels{karpv1.NodePoolLabelKey: "general-purpose"}); err != nil {
		t.Fatal(err)
	}
	e.eventually(90*time.Second, "the class deleted after its NodeClaims", func(ctx context.Context) (bool, error) {
		err := e.kube.Get(ctx, types.NamespacedName{Name: "default"}, &cls)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	api, err := ec2api.New(e.ctx, ec2api.Config{Region: "us-east-1", BaseEndpoint: e.endpoint,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")})
	if err != nil {
		t.Fatal(err)
	}
	lts, err := api.DescribeLaunchTemplates(e.ctx, &ec2.DescribeLaunchTemplatesInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range lts.LaunchTemplates {
		t.Errorf("launch template %s left behind", aws.ToString(lt.LaunchTemplateName))
	}
	if p := simProfile(e, profile); p != nil {
		t.Errorf("instance profile %s left behind: %+v", profile, p)
	}
	scenarioLogf(t, "scenario nodeclass: class status with %d subnets, %d AMIs, instance profile %s on %d instance(s); broken pool NodeClassReady=False, 0 NodeClaims, pod told %q; missing role InstanceProfileReady=False; class deletion removed its launch templates (%d DeleteLaunchTemplate) and instance profile (%d DeleteInstanceProfile)",
		len(st.Subnets), len(st.AMIs), profile, launched, failed, e.sim.Counts()["DeleteLaunchTemplate"], e.sim.Counts()["DeleteInstanceProfile"])
}

// simProfile returns the simulated IAM instance profile name, or nil.
func simProfile(e *env, name string) *ec2sim.InstanceProfile {
	for _, p := range e.sim.InstanceProfiles() {
		if p.Name == name {
			return &p
		}
	}
	return nil
}
