// Package dashboards holds karpx's Grafana dashboards (karpx.json: the
// JSON model Grafana imports, schemaVersion 39, one Prometheus datasource
// variable) embedded in the module, with what checks them: Parse and
// Dashboard.Validate (every panel has the datasource variable, targets and
// a unique id), Dashboard.Queries (every PromQL expression with its panel)
// and MetricNames (the metric names an expression selects). test/e2e's
// TestDashboardMetricsExported scrapes a running controller and webhook
// and fails on any metric a panel names that neither exports.
package dashboards
