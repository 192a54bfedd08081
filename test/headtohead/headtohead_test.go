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
)

var (
	h2hPods    = flag.Int("karpx.h2h-pods", 0, "TestHeadToHead: burst pods (0 skips the test; make bench-vs-karpenter-e2e sets 500)")
	h2hSeed    = flag.Int64("karpx.h2h-seed", 1, "TestHeadToHead: seed of the pod mix and of the pods consolidation deletes")
	h2hBoot    = flag.Duration("karpx.h2h-boot-delay", 5*time.Second, "TestHeadToHead: simulated boot delay, NodeClaim launched → Node registered, on both sides")
	h2hWindow  = flag.Duration("karpx.h2h-consolidation-window", 2*time.Minute, "TestHeadToHead: time after deleting 70% of the pods at which nodes and $/h are counted")
	h2hTimeout = flag.Duration("karpx.h2h-timeout", 10*time.Minute, "TestHeadToHead: bound of each wait (pods Running, nodes replaced, NodeClaims gone)")
	h2hSides   = flag.String("karpx.h2h-sides", "karpx,karpenter", "TestHeadToHead: comma-separated sides to run, in order")
	h2hOut     = flag.String("karpx.h2h-out", "", "TestHeadToHead: also write the table (Markdown) to this file")
)

// TestHeadToHead is `make bench-vs-karpenter-e2e`: the five workloads
// against karpx and then upstream Karpenter, each on a fresh control
// plane, back to back, and one table of their figures. It asserts only
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
	cfg := Config{Pods: *h2hPods, Seed: *h2hSeed, BootDelay: *h2hBoot, ConsolidationWindow: *h2hWindow, Timeout: *h2hTimeout}
	results := map[string]*Results{}
	for _, name := range strings.Split(*h2hSides, ",") {
		var side Autoscaler
		switch strings.TrimSpace(name) {
		case "karpx":
			side = &Karpx{Root: root}
		case "karpenter":
			side = newKarpenter(t, root)
			if side == nil {
				continue
			}
		default:
			t.Fatalf("-karpx.h2h-sides: unknown side %q (want karpx or karpenter)", name)
		}
		t.Run(side.Name(), func(t *testing.T) {
			results[side.Name()] = Run(t, side, cfg)
		})
	}
	var table bytes.Buffer
	head, _ := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	table.WriteString("commit " + strings.TrimSpace(string(head)) + "; ")
	for _, name := range []string{"karpx", "Karpenter"} {
		if r := results[name]; r != nil {
			table.WriteString(name + " run started at load average " + r.LoadAverage + "; ")
		}
	}
	table.WriteString("burst " + strconv.Itoa(cfg.Pods) + " pods, simulated boot delay " + cfg.BootDelay.String() + " on both sides\n\n")
	if err := WriteTable(&table, results["karpx"], results["Karpenter"]); err != nil {
		t.Fatal(err)
	}
	t.Logf("head to head:\n%s", table.String())
	if *h2hOut != "" {
		if err := os.WriteFile(*h2hOut, table.Bytes(), 0o644); err != nil {
			t.Error(err)
		}
	}
}
