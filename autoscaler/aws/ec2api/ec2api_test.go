package ec2api_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/types"

	"github.com/karpx/karpx/autoscaler/aws/ec2api"
	"github.com/karpx/karpx/autoscaler/aws/ec2api/ec2apitest"
	"github.com/karpx/karpx/autoscaler/state/launchlatency"
	"github.com/karpx/karpx/ec2sim"
)

// A CreateFleet call through a Client marks the launches its context
// carries issued (the EC2 client's launchIssued middleware), once; other
// operations with the same context do not.
func TestCreateFleetMarksTheLaunchIssued(t *testing.T) {
	e := ec2apitest.Start(t, ec2sim.Config{}, ec2api.Config{RetryMaxAttempts: 1})
	observed := 0
	tr := launchlatency.New(func(float64) { observed++ })
	pod := types.NamespacedName{Namespace: "default", Name: "web"}
	tr.Seen(pod)
	tr.Planned("default-abc", []types.NamespacedName{pod})
	ctx := tr.ForLaunch(context.Background(), "default-abc")

	if _, err := e.Client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
		t.Fatal(err)
	}
	if observed != 0 {
		t.Fatalf("DescribeInstances observed %d launches, want 0", observed)
	}
	// Whatever EC2 answers, the launch was issued.
	_, _ = e.Client.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1)}})
	if observed != 1 {
		t.Errorf("CreateFleet observed %d pod launches, want 1", observed)
	}
}
