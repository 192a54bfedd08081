package headtohead

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/karpx/karpx/autoscaler/scheduling/bench"
	"github.com/karpx/karpx/ec2sim"
)

func TestWriteTable(t *testing.T) {
	karpx := &Results{Side: "karpx"}
	karpx.add("burst: pending → Running p99", "s", 2, "")
	karpx.add("burst: $/h launched", "$/h", 1.5, "")
	karpx.add("only karpx", "", 3, "note")
	aws := &Results{Side: "Karpenter AWS"}
	aws.add("burst: pending → Running p99", "s", 4, "")
	aws.add("burst: $/h launched", "$/h", 0, "")
	aws.add("only Karpenter AWS", "", math.NaN(), "")
	kwok := &Results{Side: "Karpenter kwok"}
	kwok.add("burst: pending → Running p99", "s", 1, "")
	columns := []string{"karpx", "Karpenter AWS", "Karpenter kwok"}
	var b strings.Builder
	if err := WriteTable(&b, columns, map[string]*Results{"karpx": karpx, "Karpenter AWS": aws, "Karpenter kwok": kwok}); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"| figure | karpx | Karpenter AWS | Karpenter kwok | karpx / Karpenter AWS | karpx / Karpenter kwok |\n|---|---|---|---|---|---|\n",
		"| burst: pending → Running p99 | 2.00 s | 4.00 s | 1.00 s | 0.50x | 2.00x |",
		"| burst: $/h launched | $1.500/h | $0.000/h | - | - | - |",
		"| only karpx | 3 (note) | - | - | - | - |",
		"| only Karpenter AWS | - | - | - | - | - |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	// A side not run: its column shows "-", and so do its ratios.
	b.Reset()
	if err := WriteTable(&b, columns, map[string]*Results{"karpx": karpx}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "| burst: pending → Running p99 | 2.00 s | - | - | - | - |") {
		t.Errorf("table with karpx alone:\n%s", b.String())
	}
	if err := WriteTable(&b, nil, nil); err == nil {
		t.Error("WriteTable without columns: no error")
	}
}

func TestPercentile(t *testing.T) {
	s := []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}
	for p, want := range map[float64]float64{50: 5, 99: 10, 100: 10, 10: 1} {
		if got := percentile(s, p); got != want {
			t.Errorf("percentile(%v) = %v, want %v", p, got, want)
		}
	}
	if !math.IsNaN(percentile(nil, 50)) {
		t.Error("percentile of no samples should be NaN")
	}
}

func TestProcFigures(t *testing.T) {
	// Burn some CPU so that the process's CPU time is at least one tick.
	deadline := time.Now().Add(50 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x
	}
	cpu, err := ProcCPUSeconds(os.Getpid())
	if err != nil || cpu <= 0 {
		t.Errorf("ProcCPUSeconds(self) = %v, %v; want > 0", cpu, err)
	}
	rss, err := ProcStatusMiB(os.Getpid(), "VmRSS")
	if err != nil || rss <= 1 {
		t.Errorf("ProcStatusMiB(self, VmRSS) = %v, %v; want > 1 MiB", rss, err)
	}
	if _, err := ProcStatusMiB(os.Getpid(), "NoSuchField"); err == nil {
		t.Error("ProcStatusMiB of a missing field: no error")
	}
}

func TestControllerRequests(t *testing.T) {
	log := strings.Join([]string{
		// A watch counts once, when its response starts.
		`{"stage":"ResponseStarted","verb":"watch","userAgent":"karpx","requestReceivedTimestamp":"2026-11-24T09:00:00.000000Z","user":{"username":"system:serviceaccount:karpx:karpx"},"objectRef":{"resource":"pods"}}`,
		`{"stage":"ResponseComplete","verb":"watch","userAgent":"karpx","requestReceivedTimestamp":"2026-11-24T09:00:00.000000Z","user":{"username":"system:serviceaccount:karpx:karpx"},"objectRef":{"resource":"pods"}}`,
		`{"stage":"ResponseComplete","verb":"create","userAgent":"karpx","requestReceivedTimestamp":"2026-11-24T09:00:01.000000Z","user":{"username":"system:serviceaccount:karpx:karpx"},"objectRef":{"resource":"pods","subresource":"eviction"}}`,
		// Another user's request does not count.
		`{"stage":"ResponseComplete","verb":"get","userAgent":"kubectl","requestReceivedTimestamp":"2026-11-24T09:00:01.000000Z","user":{"username":"admin"},"objectRef":{"resource":"nodes"}}`,
		`{"stage":"ResponseComplete","verb":"patch","userAgent":"karpx","requestReceivedTimestamp":"2026-11-24T09:00:05.000000Z","user":{"username":"system:serviceaccount:karpx:karpx"},"objectRef":{"resource":"nodeclaims","subresource":"status"}}`,
	}, "\n") + "\n"
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	reqs, err := ControllerRequests(path, "system:serviceaccount:karpx:karpx")
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 3 {
		t.Fatalf("got %d requests, want 3: %+v", len(reqs), reqs)
	}
	from := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	byKey, total := countRequests(reqs, from, from.Add(2*time.Second))
	if total != 2 || byKey["watch pods"] != 1 || byKey["create pods/eviction"] != 1 {
		t.Errorf("countRequests in [0s, 2s) = %v, %d; want watch pods 1, create pods/eviction 1", byKey, total)
	}
}

func TestPriceUSDPerHour(t *testing.T) {
	od, ok := PriceUSDPerHour("m5.large", "on-demand", "us-east-1a")
	if !ok || od <= 0 {
		t.Fatalf("m5.large on-demand: %v, %v", od, ok)
	}
	spot, ok := PriceUSDPerHour("m5.large", "spot", "us-east-1a")
	if !ok || spot <= 0 || spot >= od {
		t.Errorf("m5.large spot %v (ok %v), want below on-demand %v", spot, ok, od)
	}
	if _, ok := PriceUSDPerHour("no.such", "on-demand", "us-east-1a"); ok {
		t.Error("a type not in the catalogue has a price")
	}
	for _, it := range bench.HeadToHeadInstanceTypes {
		if _, ok := PriceUSDPerHour(it, "on-demand", "us-east-1a"); !ok {
			t.Errorf("NodePool instance type %s has no on-demand price", it)
		}
	}
}

func TestEC2CallsFigures(t *testing.T) {
	before := map[string]ec2sim.ActionStats{"CreateFleet": {Requests: 2}, "DescribeInstances": {Requests: 10, Throttled: 1}}
	after := map[string]ec2sim.ActionStats{
		"CreateFleet":       {Requests: 12},
		"CreateTags":        {Requests: 30, Throttled: 2},
		"DescribeInstances": {Requests: 10, Throttled: 1}, // no call in between
	}
	calls := ec2Calls(before, after)
	if calls.Total != 40 || calls.Throttled != 2 || calls.ByAction["CreateFleet"] != 10 || calls.ByAction["CreateTags"] != 30 {
		t.Fatalf("ec2Calls = %+v, want 40 requests (CreateFleet 10, CreateTags 30), 2 throttled", calls)
	}
	if _, ok := calls.ByAction["DescribeInstances"]; ok {
		t.Errorf("DescribeInstances listed without a call in between: %v", calls.ByAction)
	}
	res := &Results{}
	addEC2Calls(res, calls, 25, 100)
	for _, want := range []struct {
		name  string
		value float64
		note  string
	}{
		{"burst: EC2 requests per pod", 0.4, "CreateTags 30, CreateFleet 10"},
		{"burst: EC2 CreateFleet calls", 10, "2.50 NodeClaims per call"},
		{"burst: EC2 throttled answers", 2, "CreateTags 2"},
	} {
		f, ok := res.find(want.name)
		if !ok || f.Value != want.value || f.Note != want.note {
			t.Errorf("%s = %+v (found %v), want %v %q", want.name, f, ok, want.value, want.note)
		}
	}
}

func TestErrorLines(t *testing.T) {
	log := []byte(`{"level":"info","msg":"launched instance"}
{"level":"error","ts":"2026-11-28T17:58:52Z","logger":"batcher","msg":"Tagging launched instances failed","error":"x"}
{"level":"ERROR","time":"2026-11-28T17:58:52Z","logger":"controller","message":"failed listing instance types"}
{"level":"error","msg":"Tagging launched instances failed"}
not json "level":"error"
I1128 klog line
`)
	got := errorLines(log)
	if len(got) != 2 || got["Tagging launched instances failed"] != 2 || got["failed listing instance types"] != 1 {
		t.Errorf("errorLines = %v, want the karpx message twice and Karpenter's once", got)
	}
}
