package architecture

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// wallClockFuncs are, per import path, the functions that read or wait on
// the wall clock behind the caller's back. autoscaler/ reads time through
// an injected k8s.io/utils/clock (clock.RealClock in production, a
// clocktesting.FakeClock in tests) instead, so every timed behaviour can
// be stepped in a test.
var wallClockFuncs = map[string][]string{
	"time":                                 {"Now", "Since", "Until", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick", "Sleep"},
	"k8s.io/apimachinery/pkg/apis/meta/v1": {"Now", "NowMicro"},
	"k8s.io/apimachinery/pkg/util/wait": {"Until", "UntilWithContext", "Forever", "JitterUntil", "JitterUntilWithContext",
		"NonSlidingUntil", "NonSlidingUntilWithContext", "PollUntilContextTimeout", "PollUntilContextCancel",
		"Poll", "PollImmediate", "PollInfinite", "PollImmediateInfinite", "PollUntil", "PollImmediateUntil"},
}

// wallClockAllowed are the places in autoscaler/ that must use the wall
// clock, keyed "file (slash path from the module root): pkg.Func", each
// with its reason. An entry that no longer matches a use fails the test
// too, so the list only shrinks with the code.
var wallClockAllowed = map[string]string{
	"autoscaler/controllers/provisioning/provisioner.go: wait.PollUntilContextTimeout": "waitForCache waits for the informer cache to show " +
		"the NodeClaims just created: the cache fills on the API server's watch, in wall time, whatever clock the provisioner runs on",
	"autoscaler/controllers/disruption/controller.go: wait.PollUntilContextTimeout": "waitUntilCached (for waitForCache and waitForDeletion) waits for the informer cache to show " +
		"a command's candidates deleted or replaced, or a replaced NodeClaim deleted: the watch delivers in wall time, whatever clock the controller runs on",
	"autoscaler/operator/kinds.go: wait.PollUntilContextCancel": "waitForKinds waits at start for the API server to serve the CRDs it indexes: " +
		"a restarted API server registers them in wall time, whatever clock the operator runs on, and a fake clock that no test steps this early would wait forever",
}

// wallClockUses returns "pkg.Func" for every reference (a call or a
// function value) in f to one of wallClockFuncs, under whatever name f
// imports its package.
func wallClockUses(f *ast.File) []string {
	names := map[string][]string{} // local import name → its wall-clock funcs
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil || wallClockFuncs[path] == nil {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = wallClockFuncs[path]
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Obj == nil && slices.Contains(names[x.Name], sel.Sel.Name) {
			out = append(out, x.Name+"."+sel.Sel.Name)
		}
		return true
	})
	return out
}

// TestAutoscalerReadsAnInjectedClock parses every production .go file
// under autoscaler/ (no _test.go, testdata or *test helper package) and
// fails on a wall-clock use that wallClockAllowed does not list.
func TestAutoscalerReadsAnInjectedClock(t *testing.T) {
	root := "../.."
	seen := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, "autoscaler"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" || strings.HasSuffix(d.Name(), "test") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0) // resolved: a local that shadows an import is not it
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, use := range wallClockUses(f) {
			key := filepath.ToSlash(rel) + ": " + use
			seen[key] = true
			if _, ok := wallClockAllowed[key]; !ok {
				t.Errorf("%s reads the wall clock: take a k8s.io/utils/clock.Clock (Options.Clock, clock.RealClock by default) "+
					"and call it instead, or add the use to wallClockAllowed with the reason it must be wall time", key)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range wallClockAllowed {
		if !seen[key] {
			t.Errorf("wallClockAllowed lists %q, which is no longer used: remove it", key)
		}
	}
}

// TestWallClockUsesFindsAPlantedOne is the control: raw time.Now and
// time.Since, a renamed metav1 import's Now as a function value and
// wait.PollUntilContextTimeout are found; an injected clock's Now, a
// local variable named time that shadows the import, and time.Duration
// are not.
func TestWallClockUsesFindsAPlantedOne(t *testing.T) {
	src := `package p

import (
	"context"
	"time"

	kmeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

func f(ctx context.Context, clk clock.Clock) {
	start := time.Now()
	_ = time.Since(start)
	_ = clk.Now()
	var d time.Duration
	now := kmeta.Now
	_ = now
	_ = wait.PollUntilContextTimeout(ctx, d, d, true, nil)
	time := clk
	_ = time.Now()
}
`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(wallClockUses(f), " ")
	want := "time.Now time.Since kmeta.Now wait.PollUntilContextTimeout"
	if got != want {
		t.Errorf("wallClockUses = %q, want %q", got, want)
	}
}
