package karpentermetrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	kmetrics "sigs.k8s.io/karpenter/pkg/metrics"

	"github.com/karpx/karpx/autoscaler/cloudprovider"
)

// Label keys of the instance type families, as the AWS provider names them
// (github.com/aws/karpenter-provider-aws@v1.14.3 pkg/controllers/metrics/metrics.go).
const (
	// LabelInstanceType is the EC2 instance type ("m5.large").
	LabelInstanceType = "instance_type"
	// LabelZone is the availability zone name ("us-east-1a").
	LabelZone = "zone"
)

// Instance type families, set from the answers of the cloud provider's
// GetInstanceTypes as they pass through a Decorate-d CloudProvider (at
// most once per InstanceTypeMetricsInterval per NodePool). Series are
// never removed, as Karpenter never removes them.
var (
	// InstanceTypeCPUCores is karpenter_cloudprovider_instance_type_cpu_cores{instance_type}:
	// the type's vCPUs (EC2's default vCPU count, the
	// karpenter.k8s.aws/instance-cpu label; the cpu capacity when the
	// label is absent). Source: github.com/aws/karpenter-provider-aws@v1.14.3
	// pkg/providers/instancetype/metrics.go and instancetype.go.
	InstanceTypeCPUCores = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: kmetrics.Namespace, Subsystem: "cloudprovider", Name: "instance_type_cpu_cores",
		Help: "vCPUs of an instance type.",
	}, []string{LabelInstanceType})
	// InstanceTypeMemoryBytes is karpenter_cloudprovider_instance_type_memory_bytes{instance_type}:
	// the type's memory in bytes as EC2 describes it (the
	// karpenter.k8s.aws/instance-memory label, MiB, × 1,048,576; the
	// memory capacity when the label is absent). Same source.
	InstanceTypeMemoryBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: kmetrics.Namespace, Subsystem: "cloudprovider", Name: "instance_type_memory_bytes",
		Help: "Memory of an instance type, in bytes.",
	}, []string{LabelInstanceType})
	// InstanceTypeOfferingAvailable is
	// karpenter_cloudprovider_instance_type_offering_available{instance_type,capacity_type,zone}:
	// 1 when the offering is available, else 0. Source:
	// github.com/aws/karpenter-provider-aws@v1.14.3 pkg/controllers/metrics/metrics.go.
	InstanceTypeOfferingAvailable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: kmetrics.Namespace, Subsystem: "cloudprovider", Name: "instance_type_offering_available",
		Help: "Instance type offering availability (1 or 0), by instance type, capacity type and zone.",
	}, []string{LabelInstanceType, LabelCapacityType, LabelZone})
	// InstanceTypeOfferingPriceEstimate is
	// karpenter_cloudprovider_instance_type_offering_price_estimate{instance_type,capacity_type,zone}:
	// the offering's hourly price in USD as karpx uses it (a NodeOverlay's
	// price included). Same source.
	InstanceTypeOfferingPriceEstimate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: kmetrics.Namespace, Subsystem: "cloudprovider", Name: "instance_type_offering_price_estimate",
		Help: "Estimated hourly price (USD) of an instance type offering, by instance type, capacity type and zone.",
	}, []string{LabelInstanceType, LabelCapacityType, LabelZone})
)

func init() {
	crmetrics.Registry.MustRegister(InstanceTypeCPUCores, InstanceTypeMemoryBytes, InstanceTypeOfferingAvailable, InstanceTypeOfferingPriceEstimate)
}

// InstanceTypeMetricsInterval is how often the instance type families are
// refreshed per NodePool at most: Karpenter's AWS provider refreshes its
// offering gauges once a minute (pkg/controllers/metrics/controller.go@v1.14.3).
const InstanceTypeMetricsInterval = time.Minute

// instanceTypeRecorder remembers when each NodePool's answer was last
// recorded, shared by every decorator.
var instanceTypeRecorder = struct {
	sync.Mutex
	last map[string]time.Time
}{last: map[string]time.Time{}}

// recordInstanceTypes sets the instance type families from its, the
// answer for nodePool at now, unless that NodePool's answer was recorded
// less than InstanceTypeMetricsInterval before now. It reads its only.
func recordInstanceTypes(nodePool string, its []*cloudprovider.InstanceType, now time.Time) {
	instanceTypeRecorder.Lock()
	if last, ok := instanceTypeRecorder.last[nodePool]; ok && now.Sub(last) < InstanceTypeMetricsInterval {
		instanceTypeRecorder.Unlock()
		return
	}
	instanceTypeRecorder.last[nodePool] = now
	instanceTypeRecorder.Unlock()
	for _, it := range its {
		cpu := ResourceValue(corev1.ResourceCPU, it.Capacity[corev1.ResourceCPU])
		if v, err := strconv.ParseFloat(it.Labels["karpenter.k8s.aws/instance-cpu"], 64); err == nil {
			cpu = v
		}
		mem := ResourceValue(corev1.ResourceMemory, it.Capacity[corev1.ResourceMemory])
		if v, err := strconv.ParseFloat(it.Labels["karpenter.k8s.aws/instance-memory"], 64); err == nil {
			mem = v * 1024 * 1024
		}
		InstanceTypeCPUCores.WithLabelValues(it.Name).Set(cpu)
		InstanceTypeMemoryBytes.WithLabelValues(it.Name).Set(mem)
		for _, o := range it.Offerings {
			avail := 0.0
			if o.Available {
				avail = 1
			}
			InstanceTypeOfferingAvailable.WithLabelValues(it.Name, o.CapacityType, o.Zone).Set(avail)
			InstanceTypeOfferingPriceEstimate.WithLabelValues(it.Name, o.CapacityType, o.Zone).Set(o.PriceUSDPerHour)
		}
	}
}
