package dashboards

import (
	"slices"
	"strings"
	"testing"
)

// TestKarpxDashboardIsValid: dashboards/karpx.json is a dashboard Grafana
// imports (Validate: datasource variable, unique ids, every panel with the
// datasource and targets, every expression tokenized), and it has the
// panels the operations guide promises. Prints the figures.
func TestKarpxDashboardIsValid(t *testing.T) {
	d, err := Parse(Karpx())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("dashboards/karpx.json:\n%v", err)
	}
	metrics := map[string]bool{}
	panels := 0
	for _, p := range d.All() {
		if p.Type != "row" {
			panels++
		}
	}
	for _, q := range d.Queries() {
		names, _ := MetricNames(q.Expr)
		for _, n := range names {
			metrics[n] = true
		}
	}
	for _, want := range []string{"karpenter_pods_startup_duration_seconds", "karpx_nodeclaims", "karpx_disruption_decisions_total",
		"karpx_aws_api_throttled_total", "karpx_aws_api_budget_tokens", "controller_runtime_webhook_latency_seconds_bucket",
		"karpx_webhook_decisions_total", "karpenter_interruption_received_messages_total"} {
		if !metrics[want] {
			t.Errorf("no panel queries %s", want)
		}
	}
	t.Logf("dashboards/karpx.json: %d panels (%d rows), %d queries, %d metric names", panels, len(d.All())-panels, len(d.Queries()), len(metrics))
}

// TestValidateNamesEachProblem: each way a dashboard can be broken is
// reported with the panel and the field to fix.
func TestValidateNamesEachProblem(t *testing.T) {
	ok := `{"uid":"u","title":"t","schemaVersion":39,
"templating":{"list":[{"name":"datasource","type":"datasource","query":"prometheus"}]},
"panels":[{"id":1,"type":"timeseries","title":"p","gridPos":{"h":8,"w":12,"x":0,"y":0},
"datasource":{"type":"prometheus","uid":"${datasource}"},
"targets":[{"refId":"A","datasource":{"type":"prometheus","uid":"${datasource}"},"expr":"rate(x_total[5m])"}]}]}`
	d, err := Parse([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("the valid dashboard: %v", err)
	}
	for _, c := range []struct{ name, from, to, want string }{
		{"no uid", `"uid":"u"`, `"uid":""`, "uid is empty"},
		{"old schema", `"schemaVersion":39`, `"schemaVersion":27`, "schemaVersion 27"},
		{"no datasource variable", `"name":"datasource"`, `"name":"ds"`, `no variable "datasource"`},
		{"panel without datasource", `"datasource":{"type":"prometheus","uid":"${datasource}"},
"targets"`, `"targets"`, `panel 1 "p": datasource <nil>`},
		{"hard-coded datasource", `"datasource":{"type":"prometheus","uid":"${datasource}"},"expr"`, `"datasource":{"type":"prometheus","uid":"P1"},"expr"`, "target A: datasource"},
		{"no targets", `"targets":[{"refId":"A","datasource":{"type":"prometheus","uid":"${datasource}"},"expr":"rate(x_total[5m])"}]`, `"targets":[]`, "no targets"},
		{"selects nothing", `rate(x_total[5m])`, `vector(1)`, "selects no metric"},
		{"unbalanced", `rate(x_total[5m])`, `rate(x_total[5m]`, "never closed"},
		{"off the grid", `"x":0`, `"x":20`, "outside the 24-column grid"},
	} {
		d, err := Parse([]byte(strings.Replace(ok, c.from, c.to, 1)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := d.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", c.name, err, c.want)
		}
	}
	dup := strings.Replace(ok, `"panels":[{`, `"panels":[{"id":1,"type":"row","title":"r","gridPos":{"h":1,"w":24,"x":0,"y":0}},{`, 1)
	d, err = Parse([]byte(dup))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(); err == nil || !strings.Contains(err.Error(), "ids must be unique") {
		t.Errorf("duplicate id: Validate() = %v, want ids must be unique", err)
	}
}

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`histogram_quantile(0.99, sum by (le, controller) (rate(karpenter_scheduler_scheduling_duration_seconds_bucket[$__rate_interval])))`,
			[]string{"karpenter_scheduler_scheduling_duration_seconds_bucket"}},
		{`sum(rate(a_sum[5m])) by (le) / sum(rate(a_count[5m])) without (pod)`, []string{"a_count", "a_sum"}},
		{`max by (quantile) (s{quantile=~"0.5|0.9", job="karpx"})`, []string{"s"}},
		{`x_total and on (instance) group_left (nodepool) y offset 5m > bool 0`, []string{"x_total", "y"}},
		{`{__name__="named", a="b"} or label_replace(z, "dst", "$1", "src", "(.*)")`, []string{"named", "z"}},
		{`rate(m{l="a}b \" c"}[${window}]) * 1e3 + .5 - Inf + NaN`, []string{"m"}},
		{`count(up) # count of up
+ count_values("v", other)`, []string{"other", "up"}},
		{`sum without (a) (w) @ start()`, []string{"w"}},
	} {
		got, err := MetricNames(c.expr)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("MetricNames(%q) = %v, %v; want %v", c.expr, got, err, c.want)
		}
	}
	for _, bad := range []string{`rate(x[5m]`, `x{a="b"`, `x{a="b}`, `sum(x))`, `{__name__=~"karp.*"}`, `x[5m`} {
		if got, err := MetricNames(bad); err == nil {
			t.Errorf("MetricNames(%q) = %v, want an error", bad, got)
		}
	}
}
