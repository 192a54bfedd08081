package operator

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMinValuesPolicyOption: --min-values-policy defaults to Strict, as
// Karpenter's; MIN_VALUES_POLICY and the flag set it; anything but Strict
// or BestEffort is an error naming the flag.
func TestMinValuesPolicyOption(t *testing.T) {
	if got := DefaultOptions().MinValuesPolicy; got != "Strict" {
		t.Fatalf("default %q, want Strict", got)
	}
	t.Setenv("MIN_VALUES_POLICY", "BestEffort")
	if got := DefaultOptions().MinValuesPolicy; got != "BestEffort" {
		t.Fatalf("with MIN_VALUES_POLICY=BestEffort: %q", got)
	}
	var o Options
	fs := flag.NewFlagSet("karpx", flag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--cluster-name", "demo", "--min-values-policy", "Loose"}); err != nil {
		t.Fatal(err)
	}
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), `--min-values-policy (MIN_VALUES_POLICY) "Loose": want Strict or BestEffort`) {
		t.Fatalf("Validate = %v, want an error naming --min-values-policy", err)
	}
	o.MinValuesPolicy = "Strict"
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate with Strict: %v", err)
	}
}

// TestInterruptionQueueOption: --interruption-queue is off (empty) by
// default, as Karpenter's settings.interruptionQueue; INTERRUPTION_QUEUE
// sets it; a URL or ARN instead of the name is an error naming the flag.
func TestInterruptionQueueOption(t *testing.T) {
	if got := DefaultOptions().InterruptionQueue; got != "" {
		t.Fatalf("default %q, want empty (off)", got)
	}
	t.Setenv("INTERRUPTION_QUEUE", "karpx-demo")
	if got := DefaultOptions().InterruptionQueue; got != "karpx-demo" {
		t.Fatalf("with INTERRUPTION_QUEUE=karpx-demo: %q", got)
	}
	for _, bad := range []string{"https://sqs.us-east-1.amazonaws.com/123456789012/karpx", "arn:aws:sqs:us-east-1:123456789012:karpx", "${INTERRUPTION_QUEUE}"} {
		o := DefaultOptions()
		o.ClusterName, o.InterruptionQueue = "demo", bad
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--interruption-queue (INTERRUPTION_QUEUE)") {
			t.Errorf("Validate with %q = %v, want an error naming --interruption-queue", bad, err)
		}
	}
	o := DefaultOptions()
	o.ClusterName, o.InterruptionQueue = "demo", "Karpenter-demo_queue.fifo"
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate with a valid name: %v", err)
	}
}

// TestFeatureGatesOption: --feature-gates reads Karpenter's format:
// SpotToSpotConsolidation off by default and set by the flag or
// FEATURE_GATES; Karpenter's own default value passes; a gate karpx does
// not implement set to true, an unknown gate and a value that is not a
// bool are errors naming the flag.
func TestFeatureGatesOption(t *testing.T) {
	o := DefaultOptions()
	o.ClusterName = "demo"
	if err := o.Validate(); err != nil || o.SpotToSpotConsolidation || o.NodeRepair {
		t.Fatalf("default: Validate %v, SpotToSpotConsolidation %v, NodeRepair %v; want both off", err, o.SpotToSpotConsolidation, o.NodeRepair)
	}
	t.Setenv("FEATURE_GATES", "SpotToSpotConsolidation=true")
	o = DefaultOptions()
	o.ClusterName = "demo"
	if err := o.Validate(); err != nil || !o.SpotToSpotConsolidation {
		t.Fatalf("FEATURE_GATES=SpotToSpotConsolidation=true: Validate %v, gate %v", err, o.SpotToSpotConsolidation)
	}
	t.Setenv("FEATURE_GATES", "NodeRepair=true")
	o = DefaultOptions()
	o.ClusterName = "demo"
	if err := o.Validate(); err != nil || !o.NodeRepair || o.SpotToSpotConsolidation {
		t.Fatalf("FEATURE_GATES=NodeRepair=true: Validate %v, NodeRepair %v, SpotToSpotConsolidation %v", err, o.NodeRepair, o.SpotToSpotConsolidation)
	}
	t.Setenv("FEATURE_GATES", "StaticCapacity=true")
	o = DefaultOptions()
	o.ClusterName = "demo"
	if err := o.Validate(); err != nil || !o.StaticCapacity || o.NodeRepair {
		t.Fatalf("FEATURE_GATES=StaticCapacity=true: Validate %v, StaticCapacity %v, NodeRepair %v", err, o.StaticCapacity, o.NodeRepair)
	}
	t.Setenv("FEATURE_GATES", "NodeOverlay=true")
	o = DefaultOptions()
	o.ClusterName = "demo"
	if err := o.Validate(); err != nil || !o.NodeOverlay || o.NodeRepair {
		t.Fatalf("FEATURE_GATES=NodeOverlay=true: Validate %v, NodeOverlay %v, NodeRepair %v", err, o.NodeOverlay, o.NodeRepair)
	}
	t.Setenv("FEATURE_GATES", "ReservedCapacity=true")
	o = DefaultOptions()
	o.ClusterName = "demo"
	if err := o.Validate(); err != nil || !o.ReservedCapacity || o.NodeRepair {
		t.Fatalf("FEATURE_GATES=ReservedCapacity=true: Validate %v, ReservedCapacity %v, NodeRepair %v", err, o.ReservedCapacity, o.NodeRepair)
	}
	for in, want := range map[string]string{
		// Karpenter v1.14's default (pkg/operator/options/options.go).
		"NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false": "",
		"ReservedCapacity=false,CapacityBuffer=true": "CapacityBuffer=true: not supported by karpx yet",
		"NodeRepair=false,ReservedCapacity=false,SpotToSpotConsolidation=true,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false": "",
		"NodeRepair=true,SpotToSpotConsolidation=false": "",
		"StaticCapacity=true":                           "",
		"NodeRepair=yes":                                "want Name=true or Name=false",
		"SpotToSpot=true":                               "unknown gate",
		"SpotToSpotConsolidation=maybe":                 "want Name=true or Name=false",
		" SpotToSpotConsolidation=true ":                "",
	} {
		o.FeatureGates = in
		err := o.Validate()
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), "--feature-gates (FEATURE_GATES)") && strings.Contains(err.Error(), want)) ||
			(err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("--feature-gates %q: Validate = %v; want %q", in, err, want)
		}
	}
}

// testOnlySwitches are the ten switches that existed only so a test could
// show a field problem with karpx's protection off (issue 29): the
// Options field (a path below Options), its flag and its environment
// variable. The controls now run the real Karpenter (test/upstream); none
// of them may come back as an option, a flag or an environment variable.
// The tenth, --initialization-grace-window=0 meaning "off", is checked by
// TestInitializationGraceHasNoOffValue.
var testOnlySwitches = []struct{ field, flag, env string }{
	{"NominatePods", "nominate-pods", "NOMINATE_PODS"},
	{"LaunchHealth", "launch-health", "LAUNCH_HEALTH"},
	{"EC2Caches", "ec2-caches", "EC2_CACHES"},
	{"CountInFlight", "count-in-flight", "COUNT_IN_FLIGHT"},
	{"DisruptionEdgeTriggered", "disruption-edge-triggered", "DISRUPTION_EDGE_TRIGGERED"},
	{"HydrationOrdering", "hydration-ordering", "HYDRATION_ORDERING"},
	{"CapacityLearning", "capacity-learning", "CAPACITY_LEARNING"},
	{"Budget.Disabled", "aws-api-budget-disabled", "AWS_API_BUDGET_DISABLED"},
	{"EC2Batching", "ec2-batching", "EC2_BATCHING"},
}

// switchesFound returns, for each of testOnlySwitches, where it appears:
// as an exported field path of typ (struct fields followed into nested
// structs), a flag registered on fs, or a quoted string literal
// ("nominate-pods", "NOMINATE_PODS") in one of sources (file name → text).
func switchesFound(typ reflect.Type, fs *flag.FlagSet, sources map[string]string) []string {
	fields := map[string]bool{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			fields[prefix+f.Name] = true
			if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() != "time" {
				walk(f.Type, prefix+f.Name+".")
			}
		}
	}
	walk(typ, "")
	var found []string
	for _, s := range testOnlySwitches {
		if fields[s.field] {
			found = append(found, "field Options."+s.field)
		}
		if fs.Lookup(s.flag) != nil {
			found = append(found, "flag --"+s.flag)
		}
		for name, text := range sources {
			for _, lit := range []string{strconv.Quote(s.flag), strconv.Quote(s.env)} {
				if strings.Contains(text, lit) {
					found = append(found, name+": "+lit)
				}
			}
		}
	}
	sort.Strings(found)
	return found
}

// productionSources reads the non-test Go files of dirs (relative to this
// package), keyed by path.
func productionSources(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out[f] = string(b)
		}
	}
	return out
}

// TestNoTestOnlySwitches: none of the ten test-only switches is an
// Options field, a flag of the controller or a flag or environment name
// in the operator's or cmd/karpx-controller's sources. Control: each kind
// of planted switch is found.
func TestNoTestOnlySwitches(t *testing.T) {
	fs := flag.NewFlagSet("karpx", flag.ContinueOnError)
	var o Options
	o.AddFlags(fs)
	if found := switchesFound(reflect.TypeFor[Options](), fs, productionSources(t, ".", "../../cmd/karpx-controller")); len(found) > 0 {
		t.Errorf("test-only switches in production options: %s; a protection has no off switch (issue 29), its control runs the real Karpenter in test/upstream", strings.Join(found, ", "))
	}

	// Control: a planted field (also nested), flag and literals are found.
	type budgetWithSwitch struct{ Disabled bool }
	planted := reflect.TypeFor[struct {
		NominatePods bool
		Budget       budgetWithSwitch
	}]()
	pfs := flag.NewFlagSet("planted", flag.ContinueOnError)
	pfs.Bool("ec2-batching", true, "")
	src := map[string]string{"options.go": `fs.BoolVar(&o.X, "count-in-flight", env("COUNT_IN_FLIGHT", "true") == "true", "")`}
	want := []string{`field Options.Budget.Disabled`, `field Options.NominatePods`, `flag --ec2-batching`, `options.go: "COUNT_IN_FLIGHT"`, `options.go: "count-in-flight"`}
	if got := switchesFound(planted, pfs, src); !slices.Equal(got, want) {
		t.Errorf("planted switches found: %q, want %q", got, want)
	}
}

// TestInitializationGraceHasNoOffValue: --initialization-grace-window=0
// no longer switches the grace window and nomination off; it is an error
// naming the flag, as is a negative window.
func TestInitializationGraceHasNoOffValue(t *testing.T) {
	for _, bad := range []time.Duration{0, -time.Second} {
		o := DefaultOptions()
		o.ClusterName, o.InitializationGrace = "demo", bad
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--initialization-grace-window (INITIALIZATION_GRACE_WINDOW)") {
			t.Errorf("Validate with a %s window = %v, want an error naming --initialization-grace-window", bad, err)
		}
	}
	o := DefaultOptions()
	o.ClusterName = "demo"
	if err := o.Validate(); err != nil || o.InitializationGrace != 5*time.Minute {
		t.Fatalf("default window %s, Validate = %v; want 5m and no error", o.InitializationGrace, err)
	}
}
