package capacitytype_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/apis/scheme"
	awscloud "github.com/karpx/karpx/autoscaler/aws/cloudprovider"
	"github.com/karpx/karpx/autoscaler/aws/controllers/capacityreservation/capacitytype"
	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/aws/providers/instance"
	"github.com/karpx/karpx/ec2sim"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

const cluster = "test"

// instances lists the cluster's instances with the real instance
// provider and shows them as the cloud provider's List does: provider ID
// and capacity type.
type instances struct{ p *instance.Provider }

func (l instances) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	insts, err := l.p.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []*karpv1.NodeClaim
	for _, in := range insts {
		out = append(out, &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{karpv1.CapacityTypeLabelKey: in.CapacityType}},
			Status: karpv1.NodeClaimStatus{ProviderID: instance.ProviderID(in.Zone, in.ID)}})
	}
	return out, nil
}

// TestReservedRelabelledOnDemandWhenODCREnds: two instances run in a
// targeted ODCR, their NodeClaims and registered Nodes labelled reserved.
// While the reservation is active nothing changes; once it expires, EC2
// (ec2sim) reports them on-demand and the controller relabels both
// NodeClaims and the registered Node, leaving the unregistered Node to
// registration.
func TestReservedRelabelledOnDemandWhenODCREnds(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	e := ec2apitest.Start(t, ec2sim.Config{Clock: clk, PendingDelay: time.Second, Throttle: ec2sim.ThrottleConfig{Disabled: true}},
		ec2api.Config{RetryMaxAttempts: 1})
	ctx := context.Background()
	end := t0.Add(time.Hour)
	cr, err := e.Sim.AddCapacityReservation(ec2sim.CapacityReservation{InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		TotalInstanceCount: 2, InstanceMatchCriteria: ec2sim.MatchCriteriaTargeted, EndDate: end})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Client.GetParameter(ctx, &ssm.GetParameterInput{
		Name: aws.String("/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/recommended/image_id")})
	if err != nil {
		t.Fatal(err)
	}
	// A launch template as Karpenter's for capacity type reserved.
	if _, err := e.Client.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("reserved"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: p.Parameter.Value,
			CapacityReservationSpecification: &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
				CapacityReservationPreference: ec2types.CapacityReservationPreferenceCapacityReservationsOnly,
				CapacityReservationTarget:     &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(cr)}}}}); err != nil {
		t.Fatal(err)
	}
	out, err := e.Client.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("reserved"), Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeM5Large, AvailabilityZone: aws.String("us-east-1a")}}}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(2),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String(instance.ClusterTagKey(cluster)), Value: aws.String("owned")},
			{Key: aws.String(instance.TagNodePool), Value: aws.String("pool")}}}}})
	if err != nil || len(out.Instances) != 1 || len(out.Instances[0].InstanceIds) != 2 {
		t.Fatalf("CreateFleet: %+v %v", out, err)
	}
	clk.Step(time.Second)
	reserved := map[string]string{karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeReserved,
		awscloud.LabelCapacityReservationID: cr, awscloud.LabelCapacityReservationType: "default"}
	var objs []client.Object
	for i, id := range out.Instances[0].InstanceIds {
		name := []string{"registered", "unregistered"}[i]
		nodeLabels := map[string]string{}
		for k, v := range reserved {
			nodeLabels[k] = v
		}
		if name == "registered" {
			nodeLabels[karpv1.NodeRegisteredLabelKey] = "true"
		}
		ncLabels := map[string]string{karpv1.NodePoolLabelKey: "pool"}
		for k, v := range reserved {
			ncLabels[k] = v
		}
		objs = append(objs,
			&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: ncLabels},
				Status: karpv1.NodeClaimStatus{ProviderID: instance.ProviderID("us-east-1a", id), NodeName: "node-" + name}},
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + name, Labels: nodeLabels}})
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	c := capacitytype.New(kube, instances{instance.NewProvider(e.Client, cluster, nil)}, clk, capacitytype.Options{})

	updated, err := c.Poll(ctx)
	if err != nil || len(updated) != 0 {
		t.Fatalf("while the ODCR is active: updated %v, %v; want none", updated, err)
	}
	clk.SetTime(end)
	updated, err = c.Poll(ctx)
	if err != nil || len(updated) != 2 {
		t.Fatalf("after the ODCR expired: updated %v, %v; want both NodeClaims", updated, err)
	}
	labelsOf := func(obj client.Object) map[string]string {
		t.Helper()
		if err := kube.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		return obj.GetLabels()
	}
	for _, name := range []string{"registered", "unregistered"} {
		l := labelsOf(&karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}})
		if l[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeOnDemand || l[awscloud.LabelCapacityReservationID] != "" ||
			l[awscloud.LabelCapacityReservationType] != "" || l[karpv1.NodePoolLabelKey] != "pool" {
			t.Errorf("NodeClaim %s labels %v, want on-demand without the reservation's", name, l)
		}
	}
	if l := labelsOf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-registered"}}); l[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeOnDemand ||
		l[awscloud.LabelCapacityReservationID] != "" {
		t.Errorf("registered Node labels %v, want on-demand", l)
	}
	if l := labelsOf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-unregistered"}}); l[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeReserved {
		t.Errorf("unregistered Node labels %v, want left to registration", l)
	}
	if updated, err := c.Poll(ctx); err != nil || len(updated) != 0 {
		t.Errorf("second poll: updated %v, %v; want none", updated, err)
	}
}
