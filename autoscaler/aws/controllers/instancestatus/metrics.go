package instancestatus

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// unhealthyTotal is Karpenter v1.14's
// karpenter_interruption_instance_status_unhealthy_total{category}
// (aws/karpenter-provider-aws pkg/controllers/interruption/metrics.go),
// category one of instancestatus.Category's values.
var unhealthyTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: "karpenter", Subsystem: "interruption", Name: "instance_status_unhealthy_total",
	Help: "Instances of this cluster's NodeClaims found unhealthy by EC2 DescribeInstanceStatus, each instance and category counted once while it stays unhealthy, by category (InstanceStatus, SystemStatus, EventStatus).",
}, []string{"category"})

func init() {
	crmetrics.Registry.MustRegister(unhealthyTotal)
}
