package headtohead

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/karpx/karpx/test/cluster"
	"github.com/karpx/karpx/test/upstream"
)

var (
	h2hPods       = flag.Int("karpx.h2h-pods", 0, "TestHeadToHead: burst pods (0 skips the test; make bench-vs-karpenter-e2e sets 500)")
	h2hSeed       = flag.Int64("karpx.h2h-seed", 1, "TestHeadToHead: seed of the pod mix and of the pods consolidation deletes")
	h2hBoot       = flag.Duration("karpx.h2h-boot-delay", 5*time.Second, "TestHeadToHead: simulated boot delay, NodeClaim launched → Node registered, on both sides")
	h2hWindow     = flag.Duration("karpx.h2h-consolidation-window", 2*time.Minute, "TestHeadToHead: time after deleting 70% of the pods at which nodes and $/h are counted")
	h2hQuiet      = flag.Duration("karpx.h2h-consolidation-quiet", 90*time.Second, "TestHeadToHead: after the consolidation window, how long no Node may appear or begin deleting before the consolidation counts as settled and drift starts (90s: longer than consolidateAfter 30s, Karpenter's 15s validation and 10s poll, and a node's drain; 0 starts drift at the window's end)")
	h2hTimeout    = flag.Duration("karpx.h2h-timeout", 10*time.Minute, "TestHeadToHead: bound of each wait (pods Running, the consolidation settled, nodes replaced, NodeClaims gone)")
	h2hSides      = flag.String("karpx.h2h-sides", "karpx,karpenter-aws,karpenter-kwok", "TestHeadToHead: comma-separated sides to run, in order: karpx, karpenter-aws (bin/karpenter-aws on its own ec2sim), karpenter-kwok (bin/karpenter-kwok; \"karpenter\" is accepted for it)")
	h2hKwok       = flag.Uint("karpx.h2h-kwok-pod-workers", 32, "TestHeadToHead: pods the kwok controller plays at once on every side's control plane (kwok's podPlayStageParallelism; its default 4 queues a wave of pods that real kubelets, one per Node, would start side by side; 0 keeps kwok's default)")
	h2hKwokNodes  = flag.Uint("karpx.h2h-kwok-node-workers", 32, "TestHeadToHead: Nodes the kwok controller plays at once on every side's control plane (kwok's nodePlayStageParallelism, which posts each Node's Ready; its default 4 queues a wave of Nodes registered together, whose real kubelets would each post their own; 0 keeps kwok's default)")
	h2hKarpxFlags = flag.String("karpx.h2h-karpx-flags", "", "TestHeadToHead: more flags for karpx's controller, space-separated, after the harness's own (e.g. --aws-api-budget-fraction=1 to take all of EC2's buckets, as Karpenter AWS does); the table's header lists them")
	h2hWarmup     = flag.Duration("karpx.h2h-warmup", 2*time.Minute, "TestHeadToHead: least time from each controller's start to its burst, as in a cluster whose controller ran before the burst (2m ends karpx's EC2 budget slow start, which is for a restarted controller; 0 starts the burst once the NodePools are Ready)")
	h2hOut        = flag.String("karpx.h2h-out", "", "TestHeadToHead: also write the table (Markdown) to this file (a relative path is the repository root's)")
)

// TestHeadToHead is `make bench-vs-karpenter-e2e`: the five workloads
// against karpx, the real Karpenter AWS provider and Karpenter's kwok
// provider (-karpx.h2h-sides), each on a fresh control plane (the AWS
// sides each with their own ec2sim), back to back, and one table of their
// figures. It asserts only
// that each side ran its workloads (pods Running, no RBAC refusal); the
// figures are for docs/performance.md. Skipped unless -karpx.h2h-pods is
// set.
func TestHeadToHead(t *testing.T) {
	if *h2hPods <= 0 {
		t.Skip("a scripted measurement: run with -karpx.h2h-pods N (make bench-vs-karpenter-e2e)")
	}
	// The recorder's watches log through controller-runtime's logger.
	ctrllog.SetLogger(logr.Discard())
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(bin)
	// HEAD when the run starts: the binaries under test were built by then,
	// and commits made during a run (it takes 10-30 minutes) are not in it.
	head, _ := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	karpxFlags := strings.Fields(*h2hKarpxFlags)
	cfg := Config{Pods: *h2hPods, Seed: *h2hSeed, BootDelay: *h2hBoot, ConsolidationWindow: *h2hWindow, ConsolidationQuiet: *h2hQuiet, Timeout: *h2hTimeout, KwokPodWorkers: *h2hKwok, KwokNodeWorkers: *h2hKwokNodes, Warmup: *h2hWarmup}
	results := map[string]*Results{}
	// The table's columns, karpx first: the ratios are karpx / each other.
	columns := []string{"karpx", "Karpenter AWS", "Karpenter kwok"}
	for _, name := range strings.Split(*h2hSides, ",") {
		var side Autoscaler
		switch strings.TrimSpace(name) {
		case "karpx":
			side = &Karpx{Root: root, Flags: karpxFlags}
		case "karpenter-aws":
			side = newKarpenterAWS(t, filepath.Join(bin, upstream.AWSBinaryName))
		case "karpenter-kwok", "karpenter":
			side = newKarpenter(t, root)
		default:
			t.Fatalf("-karpx.h2h-sides: unknown side %q (want karpx, karpenter-aws or karpenter-kwok)", name)
		}
		if side == nil {
			continue
		}
		t.Run(side.Name(), func(t *testing.T) {
			results[side.Name()] = Run(t, side, cfg)
		})
	}
	var table bytes.Buffer
	table.WriteString("commit " + strings.TrimSpace(string(head)) + "; ")
	for _, name := range columns {
		if r := results[name]; r != nil {
			table.WriteString(name + " run started at load average " + r.LoadAverage + "; ")
		}
	}
	table.WriteString("Karpenter AWS " + upstream.AWSVersion + ", Karpenter kwok " + upstream.Version + "; ")
	table.WriteString("burst " + strconv.Itoa(cfg.Pods) + " pods, simulated boot delay " + cfg.BootDelay.String() + " on every side, kwok pod workers " + kwokWorkers(cfg.KwokPodWorkers) + ", kwok Node workers " + kwokWorkers(cfg.KwokNodeWorkers) + ", burst " + cfg.Warmup.String() + " after each controller's start")
	if len(karpxFlags) > 0 && results["karpx"] != nil {
		table.WriteString("; karpx controller flags added: " + strings.Join(karpxFlags, " "))
	}
	table.WriteString("\n\n")
	if err := WriteTable(&table, columns, results); err != nil {
		t.Fatal(err)
	}
	t.Logf("head to head:\n%s", table.String())
	if out := *h2hOut; out != "" {
		// go test runs in the package's directory: a relative path is
		// the repository root's, as the command line that gave it meant.
		if !filepath.IsAbs(out) {
			out = filepath.Join(root, out)
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Error(err)
		} else if err := os.WriteFile(out, table.Bytes(), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// kwokWorkers names the kwok pod or Node workers of a run for the table's
// header.
func kwokWorkers(n uint) string {
	if n == 0 {
		return "4 (kwok's default)"
	}
	return strconv.FormatUint(uint64(n), 10)
}
