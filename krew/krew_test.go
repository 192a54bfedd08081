package krew

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/karpx/karpx/test/cluster"
)

// distDir is where `make dist` writes the archives, relative to this package.
const distDir = "../_output/dist"

// manifest is the part of krew's Plugin manifest the tests read.
type manifest struct {
	Spec struct {
		Version   string `json:"version"`
		Platforms []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			Sha256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// generated reads karpx.yaml, skipping t when `make krew` has not run.
func generated(t *testing.T) (manifest, []byte) {
	t.Helper()
	data, err := os.ReadFile("karpx.yaml")
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("krew/karpx.yaml missing: run `make krew` (.ci/run does, before make test)")
	}
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m, data
}

// validate runs krew's validate-krew-manifest (a Go tool of this module)
// on file and returns its output and error.
func validate(t *testing.T, file string) (string, error) {
	t.Helper()
	out, err := exec.Command("go", "tool", "validate-krew-manifest", "-skip-install", "-manifest", file).CombinedOutput()
	return string(out), err
}

// archiveFiles returns the names and contents of the regular files of a
// .tar.gz or .zip archive, and the tar modes by name.
func archiveFiles(t *testing.T, path string) (map[string][]byte, map[string]os.FileMode) {
	t.Helper()
	files, modes := map[string][]byte{}, map[string]os.FileMode{}
	if strings.HasSuffix(path, ".zip") {
		zr, err := zip.OpenReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		for _, f := range zr.File {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			files[filepath.Clean(f.Name)] = data
			modes[filepath.Clean(f.Name)] = f.Mode()
		}
		return files, modes
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Clean(hdr.Name)] = data
		modes[filepath.Clean(hdr.Name)] = os.FileMode(hdr.Mode)
	}
	return files, modes
}

// TestManifest checks krew/karpx.yaml with krew's validator and against
// the archives: one platform per archive `make dist` built (every release
// target, or this machine's alone in CI), each sha256 the archive's,
// each archive holding the binary, LICENSE and the completion helper.
func TestManifest(t *testing.T) {
	m, _ := generated(t)
	if out, err := validate(t, "karpx.yaml"); err != nil {
		t.Fatalf("validate-krew-manifest: %v\n%s", err, out)
	}
	license, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, p := range m.Spec.Platforms {
		osName, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		platforms = append(platforms, osName+"/"+arch)
		archive := filepath.Join(distDir, filepath.Base(p.URI))
		if !strings.Contains(p.URI, "/"+m.Spec.Version+"/") || !strings.Contains(filepath.Base(p.URI), "_"+m.Spec.Version+"_"+osName+"_"+arch+".") {
			t.Errorf("%s/%s: uri %s does not name version %s and the platform", osName, arch, p.URI, m.Spec.Version)
		}
		data, err := os.ReadFile(archive)
		if err != nil {
			t.Errorf("%s/%s: %v (run `make krew` again)", osName, arch, err)
			continue
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != p.Sha256 {
			t.Errorf("%s: sha256 %x, manifest says %s", archive, sum, p.Sha256)
		}
		files, modes := archiveFiles(t, archive)
		if _, ok := files[p.Bin]; !ok {
			t.Errorf("%s lacks bin %s; has %v", archive, p.Bin, keys(files))
		}
		if !bytes.Equal(files["LICENSE"], license) {
			t.Errorf("%s: LICENSE missing or not the repository's", archive)
		}
		complete := "kubectl_complete-karpx"
		if osName == "windows" {
			complete += ".cmd"
		}
		if !bytes.Contains(files[complete], []byte("kubectl karpx __complete")) {
			t.Errorf("%s: %s missing or not calling `kubectl karpx __complete`", archive, complete)
		}
		if osName != "windows" && (modes[p.Bin]&0o111 == 0 || modes[complete]&0o111 == 0) {
			t.Errorf("%s: %s (%v) and %s (%v) must be executable", archive, p.Bin, modes[p.Bin], complete, modes[complete])
		}
	}
	slices.Sort(platforms)
	built := builtPlatforms(t, m.Spec.Version)
	if !slices.Equal(platforms, built) {
		t.Errorf("platforms %v, want those `make dist` built: %v", platforms, built)
	}
	release := []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64", "windows/amd64"}
	for _, p := range built {
		if !slices.Contains(release, p) {
			t.Errorf("platform %s is not a release platform %v", p, release)
		}
	}
	if host := runtime.GOOS + "/" + runtime.GOARCH; slices.Contains(release, host) && !slices.Contains(built, host) {
		t.Errorf("platforms %v lack this machine's %s, which CI builds (make release-host)", platforms, host)
	}
}

// builtPlatforms returns, sorted, the os/arch of every archive of version
// that `make dist` listed in its SHA256SUMS: all five release platforms
// after `make krew`, this machine's alone after `make release-host` (CI).
func builtPlatforms(t *testing.T, version string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(distDir, "SHA256SUMS"))
	if err != nil {
		t.Fatalf("%v (run `make krew` again)", err)
	}
	var built []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		fields := strings.Fields(line)
		if len(fields) != 2 {
			t.Fatalf("SHA256SUMS line %q: want SUM  FILE", line)
		}
		plat := strings.TrimPrefix(fields[1], "kubectl-karpx_"+version+"_")
		plat, _, _ = strings.Cut(plat, ".")
		osName, arch, ok := strings.Cut(plat, "_")
		if !ok {
			t.Fatalf("SHA256SUMS names %s, not an archive of version %s", fields[1], version)
		}
		built = append(built, osName+"/"+arch)
	}
	slices.Sort(built)
	return built
}

// TestValidatorRejects is TestManifest's control: the same validator fails
// on the manifest with a broken sha256 and with a version that is not semver.
func TestValidatorRejects(t *testing.T) {
	_, data := generated(t)
	m, _ := generated(t)
	for name, broken := range map[string]string{
		"sha256":  strings.Replace(string(data), m.Spec.Platforms[0].Sha256, "not-a-sha", 1),
		"version": strings.Replace(string(data), "version: "+m.Spec.Version, "version: latest", 1),
	} {
		dir := t.TempDir()
		file := filepath.Join(dir, "karpx.yaml")
		if err := os.WriteFile(file, []byte(broken), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := validate(t, file); err == nil {
			t.Errorf("broken %s accepted:\n%s", name, out)
		}
	}
}

// TestArchiveThroughKubectl unpacks this machine's linux archive, puts its
// directory first on PATH and runs `kubectl karpx version` and `kubectl
// karpx status` through the real kubectl against a test control plane with
// the CRDs and one NodePool.
func TestArchiveThroughKubectl(t *testing.T) {
	m, _ := generated(t)
	if runtime.GOOS != "linux" {
		t.Skip("runs the linux archive")
	}
	c := cluster.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.InstallCRDs(ctx, "../manifests/crds"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, []byte(nodePool), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}

	archive := filepath.Join(distDir, fmt.Sprintf("kubectl-karpx_%s_linux_%s.tar.gz", m.Spec.Version, runtime.GOARCH))
	files, modes := archiveFiles(t, archive)
	pathDir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(pathDir, name), data, modes[name].Perm()); err != nil {
			t.Fatal(err)
		}
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not on PATH")
	}
	run := func(exe string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, exe, args...)
		// Only the archive's directory and kubectl's: no other kubectl-karpx
		// can be found.
		cmd.Env = append(os.Environ(), "PATH="+pathDir+string(os.PathListSeparator)+filepath.Dir(kubectl), "KUBECONFIG="+c.Kubeconfig, "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(exe), strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := run(kubectl, "plugin", "list", "--name-only"); !strings.Contains(out, "kubectl-karpx") {
		t.Errorf("kubectl plugin list does not find the archive's binary:\n%s", out)
	}
	out := run(kubectl, "karpx", "version")
	if !strings.Contains(out, "Plugin Version: "+m.Spec.Version+"\n") || !strings.Contains(out, "Server Version: v1.") {
		t.Errorf("kubectl karpx version:\n%s\nwant plugin %s and the server's version", out, m.Spec.Version)
	}
	out = run(kubectl, "karpx", "status")
	if !strings.Contains(out, "krew-test") || !strings.Contains(out, "No NodeClaims found.") {
		t.Errorf("kubectl karpx status lacks NodePool krew-test:\n%s", out)
	}
	// The completion helper, as kubectl runs it for `kubectl karpx st<TAB>`.
	if out := run(filepath.Join(pathDir, "kubectl_complete-karpx"), "st"); !strings.HasPrefix(out, "status\t") {
		t.Errorf("completion of `st`: %q", out)
	}
}

const nodePool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: krew-test
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
`

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
