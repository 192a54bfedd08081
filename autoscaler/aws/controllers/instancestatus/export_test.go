package instancestatus

import "github.com/prometheus/client_golang/prometheus"

// InstanceStatusUnhealthy is the unhealthy counter of category, for tests.
func InstanceStatusUnhealthy(category string) prometheus.Counter {
	return unhealthyTotal.WithLabelValues(category)
}
