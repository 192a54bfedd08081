package karpentermetrics

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// typesCloud answers GetInstanceTypes with its types.
type typesCloud struct {
	fakeCloud
	types []*cloudprovider.InstanceType
}

func (c *typesCloud) GetInstanceTypes(context.Context, *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return c.types, nil
}

func TestInstanceTypeGaugesFromGetInstanceTypes(t *testing.T) {
	it := fmt.Sprintf("t%d.large", time.Now().UnixNano()) // a name no other test sets
	noLabels := it + "-nolabels"
	cloud := &typesCloud{types: []*cloudprovider.InstanceType{
		{Name: it, Labels: map[string]string{"karpenter.k8s.aws/instance-cpu": "2", "karpenter.k8s.aws/instance-memory": "8192"},
			// Capacity is what a node gets (memory less the VM overhead);
			// the gauges report EC2's figures from the labels.
			Capacity: rl("cpu", "2", "memory", "7500Mi"),
			Offerings: []cloudprovider.Offering{
				{Zone: "us-east-1a", CapacityType: "spot", PriceUSDPerHour: 0.031, Available: true},
				{Zone: "us-east-1b", CapacityType: "on-demand", PriceUSDPerHour: 0.096, Available: false},
			}},
		{Name: noLabels, Capacity: rl("cpu", "500m", "memory", "1Gi")},
	}}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	pool := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool-" + it}}
	d := DecorateWithClock(cloud, ControllerProvisioner, "aws", clk)
	if _, err := d.GetInstanceTypes(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"cpu_cores", testutil.ToFloat64(InstanceTypeCPUCores.WithLabelValues(it)), 2},
		{"memory_bytes", testutil.ToFloat64(InstanceTypeMemoryBytes.WithLabelValues(it)), 8192 * 1024 * 1024},
		{"cpu_cores without label", testutil.ToFloat64(InstanceTypeCPUCores.WithLabelValues(noLabels)), 0.5},
		{"memory_bytes without label", testutil.ToFloat64(InstanceTypeMemoryBytes.WithLabelValues(noLabels)), 1 << 30},
		{"available spot 1a", testutil.ToFloat64(InstanceTypeOfferingAvailable.WithLabelValues(it, "spot", "us-east-1a")), 1},
		{"available on-demand 1b", testutil.ToFloat64(InstanceTypeOfferingAvailable.WithLabelValues(it, "on-demand", "us-east-1b")), 0},
		{"price spot 1a", testutil.ToFloat64(InstanceTypeOfferingPriceEstimate.WithLabelValues(it, "spot", "us-east-1a")), 0.031},
		{"price on-demand 1b", testutil.ToFloat64(InstanceTypeOfferingPriceEstimate.WithLabelValues(it, "on-demand", "us-east-1b")), 0.096},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}

	// Within a minute the same NodePool's answers are not recorded again;
	// after it they are.
	cloud.types[0].Offerings[0].Available = false
	clk.SetTime(clk.Now().Add(InstanceTypeMetricsInterval - time.Second))
	if _, err := d.GetInstanceTypes(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(InstanceTypeOfferingAvailable.WithLabelValues(it, "spot", "us-east-1a")); got != 1 {
		t.Errorf("59 s later: available = %v, want 1 (not refreshed yet)", got)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if _, err := d.GetInstanceTypes(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(InstanceTypeOfferingAvailable.WithLabelValues(it, "spot", "us-east-1a")); got != 0 {
		t.Errorf("a minute later: available = %v, want 0", got)
	}
}
