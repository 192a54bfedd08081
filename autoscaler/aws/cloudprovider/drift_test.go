package cloudprovider

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1 "github.com/karpx/karpx/apis/v1"
	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// karpenterHashes are the karpenter.k8s.aws/ec2nodeclass-hash values that
// Karpenter's AWS provider v1.14.3 (EC2NodeClassHashVersion v5, the same
// function as v1.14.0) writes for the EC2NodeClasses in testdata: each file
// unmarshalled into its github.com/aws/karpenter-provider-aws/pkg/apis/v1
// EC2NodeClass and hashed with EC2NodeClass.Hash(&caBundle), run from a
// scratch module requiring karpenter-provider-aws v1.14.3 (the version of
// hack/karpenter-aws).
var karpenterHashes = []struct {
	file, caBundle, hash string
}{
	{"karpenter-ec2nodeclass-al2023.json", "Q0E=", "2209665554250360110"},
	{"karpenter-ec2nodeclass-al2023.json", "", "5003705378082448263"},
	{"karpenter-ec2nodeclass-bottlerocket.json", "Q0E=", "10974730470404846549"},
}

func readClass(t *testing.T, file string) *v1.EC2NodeClass {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	class := &v1.EC2NodeClass{}
	if err := json.Unmarshal(b, class); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return class
}

// TestNodeClassHashIsKarpenters: the EC2NodeClass hash karpx writes and
// compares is, for the same object, the one Karpenter v1.14 writes
// (aliases and explicit families, userData, kubelet, block devices with
// non-canonical volume sizes, instance store policy, metadata options, the
// CA bundle).
func TestNodeClassHashIsKarpenters(t *testing.T) {
	for _, c := range karpenterHashes {
		if got := nodeClassHash(readClass(t, c.file), c.caBundle); got != c.hash {
			t.Errorf("%s, caBundle %q: hash %s, Karpenter v1.14 writes %s", c.file, c.caBundle, got, c.hash)
		}
	}
	// Fields Karpenter does not hash do not change it; one it hashes does.
	class := readClass(t, karpenterHashes[0].file)
	class.Spec.SubnetSelectorTerms = []v1.SubnetSelectorTerm{{ID: "subnet-other"}}
	class.Spec.AMIFamily = awssdk.String(v1.AMIFamilyAL2023) // the alias's family
	if got := nodeClassHash(class, "Q0E="); got != karpenterHashes[0].hash {
		t.Errorf("selector terms and the alias's own amiFamily changed the hash: %s", got)
	}
	class.Spec.Tags["team"] = "api"
	if got := nodeClassHash(class, "Q0E="); got == karpenterHashes[0].hash {
		t.Error("a changed tag left the hash equal")
	}
}

// resolveStatus fills the class's status.subnets and status.securityGroups
// with what ec2sim holds for the cluster, as the status controller does.
func (e *simEnv) resolveStatus(t *testing.T, class *v1.EC2NodeClass) {
	t.Helper()
	ctx := context.Background()
	tag := []ec2types.Filter{{Name: awssdk.String("tag:karpenter.sh/discovery"), Values: []string{cluster}}}
	subnets, err := e.api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: tag})
	if err != nil {
		t.Fatal(err)
	}
	class.Status.Subnets = nil
	for _, s := range subnets.Subnets {
		class.Status.Subnets = append(class.Status.Subnets, v1.Subnet{ID: awssdk.ToString(s.SubnetId), Zone: awssdk.ToString(s.AvailabilityZone)})
	}
	sgs, err := e.api.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: tag})
	if err != nil {
		t.Fatal(err)
	}
	class.Status.SecurityGroups = nil
	for _, g := range sgs.SecurityGroups {
		class.Status.SecurityGroups = append(class.Status.SecurityGroups, v1.SecurityGroup{ID: awssdk.ToString(g.GroupId), Name: awssdk.ToString(g.GroupName)})
	}
	if len(class.Status.Subnets) == 0 || len(class.Status.SecurityGroups) == 0 {
		t.Fatalf("ec2sim has no subnet or security group tagged for %s", cluster)
	}
}

// setStatus stores class (by name) in the provider's client with status.
func (e *simEnv) setStatus(t *testing.T, mutate func(*v1.EC2NodeClass)) {
	t.Helper()
	class, err := e.cp.getNodeClass(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	mutate(class)
	if err := e.cp.opts.KubeClient.(client.Client).Update(context.Background(), class); err != nil {
		t.Fatal(err)
	}
}

// TestSimIsDrifted: a launched NodeClaim is not drifted; one whose image is
// no longer what the class's AMI selector picks is AMIDrift; one whose
// recorded class hash differs at the same hash version is NodeClassDrift,
// at another version not drifted; an instance whose security groups or
// subnet the class no longer resolves is SecurityGroupDrift or SubnetDrift;
// a missing class or an unresolved status is an error, not drift.
func TestSimIsDrifted(t *testing.T) {
	e := newSimEnv(t)
	ctx := context.Background()
	e.setStatus(t, func(c *v1.EC2NodeClass) { e.resolveStatus(t, c) })
	got, err := e.cp.Create(ctx, nodeClaim("default-drift",
		in(corev1.LabelInstanceTypeStable, "m5.large"), in(karpv1.CapacityTypeLabelKey, cloudprovider.CapacityTypeOnDemand)))
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[NodeClassHashVersionAnnotationKey] != NodeClassHashVersion || got.Annotations[NodeClassHashAnnotationKey] == "" {
		t.Fatalf("Create wrote annotations %v; want the class hash at version %s", got.Annotations, NodeClassHashVersion)
	}
	check := func(name string, nc *karpv1.NodeClaim, want string) {
		t.Helper()
		if reason, err := e.cp.IsDrifted(ctx, nc); err != nil || reason != want {
			t.Errorf("%s: IsDrifted = %q, %v; want %q", name, reason, err, want)
		}
	}
	check("fresh NodeClaim", got, "")
	oldImage := got.DeepCopy()
	oldImage.Status.ImageID = "ami-0123456789abcdef0"
	check("old image", oldImage, DriftReasonAMI)
	oldClass := got.DeepCopy()
	oldClass.Annotations[NodeClassHashAnnotationKey] = "1"
	check("old class hash", oldClass, DriftReasonNodeClass)
	otherVersion := oldClass.DeepCopy()
	otherVersion.Annotations[NodeClassHashVersionAnnotationKey] = "v4"
	check("old class hash of another hash version", otherVersion, "")

	e.setStatus(t, func(c *v1.EC2NodeClass) {
		c.Status.SecurityGroups = append(c.Status.SecurityGroups, v1.SecurityGroup{ID: "sg-0added"})
	})
	check("a security group added to the class", got, DriftReasonSecurityGroup)
	e.setStatus(t, func(c *v1.EC2NodeClass) {
		e.resolveStatus(t, c)
		var others []v1.Subnet
		for _, s := range c.Status.Subnets {
			if s.Zone != got.Labels[corev1.LabelTopologyZone] {
				others = append(others, s)
			}
		}
		c.Status.Subnets = others
	})
	check("the instance's subnet gone from the class", got, DriftReasonSubnet)
	e.setStatus(t, func(c *v1.EC2NodeClass) { c.Status.Subnets = nil })
	if reason, err := e.cp.IsDrifted(ctx, got); err == nil || reason != "" {
		t.Errorf("no subnets resolved: IsDrifted = %q, %v; want an error and no drift", reason, err)
	}
	missing := got.DeepCopy()
	missing.Spec.NodeClassRef.Name = "gone"
	if reason, err := e.cp.IsDrifted(ctx, missing); err == nil || reason != "" {
		t.Fatalf("missing class: IsDrifted = %q, %v; want an error and no drift", reason, err)
	}
}

// TestSimKarpenterNodeClaimNotDrifted: a NodeClaim carrying the
// annotations Karpenter v1.14 writes at launch for this EC2NodeClass
// (karpenter.k8s.aws/ec2nodeclass-hash and -hash-version) on an instance in the
// class's subnets and security groups with a selected image is not
// drifted by karpx; the same NodeClaim after a hashed field changed is.
func TestSimKarpenterNodeClaimNotDrifted(t *testing.T) {
	class := readClass(t, karpenterHashes[0].file)
	class.Name = "default"
	class.Status.InstanceProfile = "karpx_default"
	e := newSimEnv(t, class)
	ctx := context.Background()
	e.setStatus(t, func(c *v1.EC2NodeClass) { e.resolveStatus(t, c) })
	launched, err := e.cp.Create(ctx, nodeClaim("default-karpenter",
		in(corev1.LabelInstanceTypeStable, "m5.large"), in(karpv1.CapacityTypeLabelKey, cloudprovider.CapacityTypeOnDemand)))
	if err != nil {
		t.Fatal(err)
	}
	nc := launched.DeepCopy()
	// The AWS provider's annotations (Create, pkg/cloudprovider/
	// cloudprovider.go@v1.14.0); the core's karpenter.sh/nodepool-hash
	// pair is the disruption controller's to compare.
	nc.Annotations = map[string]string{
		NodeClassHashAnnotationKey:           karpenterHashes[0].hash,
		NodeClassHashVersionAnnotationKey:    "v5",
		"karpenter.k8s.aws/instance-profile": "karpx_default",
	}
	if reason, err := e.cp.IsDrifted(ctx, nc); err != nil || reason != "" {
		t.Fatalf("NodeClaim as Karpenter v1.14 writes it: IsDrifted = %q, %v; want not drifted", reason, err)
	}
	e.setStatus(t, func(c *v1.EC2NodeClass) { c.Spec.Tags["team"] = "api" })
	if reason, err := e.cp.IsDrifted(ctx, nc); err != nil || reason != DriftReasonNodeClass {
		t.Fatalf("after a tag change: IsDrifted = %q, %v; want %s", reason, err, DriftReasonNodeClass)
	}
}

// TestSimDriftNeedsNoDescribeAfterLaunch: the subnet and security-group
// drift checks of a NodeClaim this provider launched read what Create
// learned (CreateFleet's subnet, the launch template's security groups)
// and call no DescribeInstances; what they read is what DescribeInstances
// answers for the instance. Its control is the same check after the
// cache entry is dropped: one DescribeInstances.
func TestSimDriftNeedsNoDescribeAfterLaunch(t *testing.T) {
	e := newSimEnv(t)
	ctx := context.Background()
	e.setStatus(t, func(c *v1.EC2NodeClass) { e.resolveStatus(t, c) })
	got, err := e.cp.Create(ctx, nodeClaim("default-primed",
		in(corev1.LabelInstanceTypeStable, "m5.large"), in(karpv1.CapacityTypeLabelKey, cloudprovider.CapacityTypeOnDemand)))
	if err != nil {
		t.Fatal(err)
	}
	describes := func() int64 { return e.sim.Counts()["DescribeInstances"] }
	before := describes()
	if reason, err := e.cp.IsDrifted(ctx, got); err != nil || reason != "" {
		t.Fatalf("IsDrifted after launch = %q, %v; want not drifted", reason, err)
	}
	if n := describes() - before; n != 0 {
		t.Errorf("IsDrifted after launch called DescribeInstances %d times; want 0 (Create primed the subnet and security groups)", n)
	}
	id := got.Status.ProviderID[strings.LastIndex(got.Status.ProviderID, "/")+1:]
	primed, ok := e.cp.networks.Get(id)
	if !ok {
		t.Fatalf("no primed network entry for %s", id)
	}
	described, err := e.cp.instances.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if primed.SubnetID != described.SubnetID || !sameSet(primed.SecurityGroupIDs, described.SecurityGroupIDs) {
		t.Errorf("primed subnet %s, security groups %v; DescribeInstances says %s, %v", primed.SubnetID, primed.SecurityGroupIDs, described.SubnetID, described.SecurityGroupIDs)
	}

	e.cp.networks.Remove(id)
	before = describes()
	if reason, err := e.cp.IsDrifted(ctx, got); err != nil || reason != "" {
		t.Fatalf("IsDrifted without the cache entry = %q, %v; want not drifted", reason, err)
	}
	if n := describes() - before; n != 1 {
		t.Errorf("control: IsDrifted without the cache entry called DescribeInstances %d times; want 1", n)
	}
}
