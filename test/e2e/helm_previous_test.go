package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
)

// previousRelease is what TestHelmUpgradeRollback upgrades from: the
// charts and binaries of the previous version.
type previousRelease struct {
	crd, karpx *chart.Chart
	// controller and webhook are the binaries: absolute paths of a build
	// of the previous commit, or the names of the current ones in bin/.
	controller, webhook string
	// source says where they come from, for the test's log.
	source string
}

// previous caches previousRelease's result per test process (the
// -count=N runs build once); its directory outlives the process, keyed by
// commit, so later runs reuse the build.
var previous struct {
	sync.Mutex
	commit, dir, source string
}

// loadPreviousRelease finds the previous version of charts/ in git: the
// parent of the last commit that changed charts/ (or HEAD, when the
// working tree's charts/ differs from it). It extracts that commit with
// `git archive` into $TMPDIR/karpx-e2e-previous-COMMIT and builds its
// karpx-controller and karpx-webhook there (go build, with the shared
// build cache). When no commit before the working tree has charts/, it
// uses the working tree's charts with version 0.0.0-previous and
// appVersion v0.0.0-previous (so the Deployments' image tags change on
// upgrade) and the current binaries, and says so.
func loadPreviousRelease(t *testing.T, root string) previousRelease {
	t.Helper()
	previous.Lock()
	defer previous.Unlock()
	if previous.source == "" {
		commit, err := previousChartCommit(root)
		if err != nil {
			t.Fatal(err)
		}
		previous.commit = commit
		if commit == "" {
			previous.source = "no earlier commit has charts/: the working tree's charts as version 0.0.0-previous, with the current binaries"
		} else {
			dir := filepath.Join(os.TempDir(), "karpx-e2e-previous-"+commit[:12])
			if err := buildPrevious(root, commit, dir); err != nil {
				t.Fatalf("building the previous version %s: %v", commit[:12], err)
			}
			previous.dir = dir
			previous.source = fmt.Sprintf("commit %s (charts and binaries, built in %s)", commit[:12], dir)
		}
	}
	if previous.commit == "" {
		crd := loadChart(t, filepath.Join(root, "charts", "karpx-crd"))
		karpx := loadChart(t, filepath.Join(root, "charts", "karpx"))
		for _, c := range []*chart.Chart{crd, karpx} {
			c.Metadata.Version, c.Metadata.AppVersion = "0.0.0-previous", "v0.0.0-previous"
		}
		return previousRelease{crd: crd, karpx: karpx, controller: "karpx-controller", webhook: "karpx-webhook", source: previous.source}
	}
	d := previous.dir
	return previousRelease{
		crd:        loadChart(t, filepath.Join(d, "charts", "karpx-crd")),
		karpx:      loadChart(t, filepath.Join(d, "charts", "karpx")),
		controller: filepath.Join(d, "bin", "karpx-controller"),
		webhook:    filepath.Join(d, "bin", "karpx-webhook"),
		source:     previous.source,
	}
}

// git runs git in root and returns its trimmed standard output.
func git(root string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return strings.TrimSpace(out.String()), nil
}

// previousChartCommit returns the commit holding the previous version of
// charts/ ("" when there is none).
func previousChartCommit(root string) (string, error) {
	dirty, err := git(root, "status", "--porcelain", "--", "charts")
	if err != nil {
		return "", err
	}
	candidate := "HEAD"
	if dirty == "" {
		last, err := git(root, "rev-list", "-n1", "HEAD", "--", "charts")
		if err != nil || last == "" {
			return "", err
		}
		candidate = last + "^"
	}
	if _, err := git(root, "cat-file", "-e", candidate+":charts/karpx/Chart.yaml"); err != nil {
		return "", nil
	}
	return git(root, "rev-parse", candidate)
}

// buildPrevious extracts commit into dir and builds its binaries into
// dir/bin, unless an earlier run did.
func buildPrevious(root, commit, dir string) error {
	bins := []string{"karpx-controller", "karpx-webhook"}
	built := true
	for _, b := range bins {
		if _, err := os.Stat(filepath.Join(dir, "bin", b)); err != nil {
			built = false
		}
	}
	if built {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return err
	}
	archive := exec.Command("git", "archive", "--format=tar", commit)
	archive.Dir = root
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	var errOut bytes.Buffer
	untar.Stderr, archive.Stderr = &errOut, &errOut
	if err := untar.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		return fmt.Errorf("git archive %s: %w: %s", commit, err, errOut.String())
	}
	if err := untar.Wait(); err != nil {
		return fmt.Errorf("tar: %w: %s", err, errOut.String())
	}
	args := []string{"build", "-o", filepath.Join(dir, "bin") + "/"}
	for _, b := range bins {
		args = append(args, "./cmd/"+b)
	}
	build := exec.Command("go", args...)
	build.Dir = dir
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %w\n%s", dir, err, out)
	}
	return nil
}
