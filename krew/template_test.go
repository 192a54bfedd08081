package krew

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// makeOutput runs make in the repository root with args and returns its
// standard output; it skips t when make is not installed.
func makeOutput(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not on PATH")
	}
	cmd := exec.Command("make", append([]string{"-s", "--no-print-directory", "-C", ".."}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("make %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// TestTemplateNamesTheArchives checks karpx.yaml.tmpl against the archive
// names the Makefile's dist target writes, without building them: `make
// dist-archives` lists them, `make krew-manifest` fills the template from
// a SHA256SUMS of made-up sums for exactly those files (failing on an
// unfilled placeholder, then running krew's validator), and every
// platform of the result must name one of the archives, its os and arch,
// its sum and the right binary.
func TestTemplateNamesTheArchives(t *testing.T) {
	const version = "v1.2.3"
	archives := strings.Fields(makeOutput(t, "dist-archives", "DIST_VERSION="+version))
	if len(archives) == 0 {
		t.Fatal("make dist-archives listed no archive")
	}
	dir := t.TempDir()
	sums := map[string]string{}
	var lines []string
	for _, a := range archives {
		sum := sha256.Sum256([]byte(a))
		sums[a] = hex.EncodeToString(sum[:])
		lines = append(lines, fmt.Sprintf("%s  %s", sums[a], a))
	}
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "karpx.yaml")
	makeOutput(t, "krew-manifest", "DIST_VERSION="+version, "DIST_DIR="+dir, "KREW_MANIFEST="+out,
		"DIST_URL=https://example.com/releases/download/"+version)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if m.Spec.Version != version {
		t.Errorf("version %q, want %q", m.Spec.Version, version)
	}
	var named []string
	for _, p := range m.Spec.Platforms {
		osName, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		base := filepath.Base(p.URI)
		named = append(named, base)
		if !slices.Contains(archives, base) {
			t.Errorf("%s/%s: uri %s names no archive make dist writes (%v)", osName, arch, p.URI, archives)
			continue
		}
		if !strings.HasPrefix(base, "kubectl-karpx_"+version+"_"+osName+"_"+arch+".") {
			t.Errorf("%s/%s: uri %s is another platform's archive", osName, arch, p.URI)
		}
		if p.Sha256 != sums[base] {
			t.Errorf("%s/%s: sha256 %s, want %s (the sum of %s)", osName, arch, p.Sha256, sums[base], base)
		}
		wantBin := "kubectl-karpx"
		if osName == "windows" {
			wantBin += ".exe"
		}
		if p.Bin != wantBin {
			t.Errorf("%s/%s: bin %q, want %q", osName, arch, p.Bin, wantBin)
		}
	}
	slices.Sort(named)
	slices.Sort(archives)
	if !slices.Equal(named, archives) {
		t.Errorf("template names archives %v, make dist writes %v", named, archives)
	}
}

// A manifest built for a part of the release platforms (CI's
// `make release-host` builds this machine's archive alone) names exactly
// the archives of that part, and krew's validator accepts it. The control
// is TestTemplateNamesTheArchives: with every platform, every entry stays.
func TestTemplateKeepsOnlyTheBuiltPlatforms(t *testing.T) {
	const version = "v1.2.3"
	for _, platforms := range []string{"linux/amd64", "linux/arm64 windows/amd64"} {
		archives := strings.Fields(makeOutput(t, "dist-archives", "DIST_VERSION="+version, "DIST_PLATFORMS="+platforms))
		if len(archives) != len(strings.Fields(platforms)) {
			t.Fatalf("DIST_PLATFORMS=%s: make dist-archives listed %v", platforms, archives)
		}
		dir := t.TempDir()
		var lines []string
		for _, a := range archives {
			sum := sha256.Sum256([]byte(a))
			lines = append(lines, hex.EncodeToString(sum[:])+"  "+a)
		}
		if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "karpx.yaml")
		makeOutput(t, "krew-manifest", "DIST_VERSION="+version, "DIST_DIR="+dir, "KREW_MANIFEST="+out, "DIST_PLATFORMS="+platforms)
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var m manifest
		if err := yaml.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		var named []string
		for _, p := range m.Spec.Platforms {
			named = append(named, filepath.Base(p.URI))
		}
		slices.Sort(named)
		slices.Sort(archives)
		if !slices.Equal(named, archives) {
			t.Errorf("DIST_PLATFORMS=%s: manifest names %v, want %v", platforms, named, archives)
		}
	}
}

// TestTemplateUnfilledPlaceholderFails is TestTemplateNamesTheArchives'
// control: with one archive's sum missing, krew-manifest refuses to write a
// manifest with a placeholder left in it.
func TestTemplateUnfilledPlaceholderFails(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not on PATH")
	}
	const version = "v1.2.3"
	archives := strings.Fields(makeOutput(t, "dist-archives", "DIST_VERSION="+version))
	dir := t.TempDir()
	var lines []string
	for _, a := range archives[1:] {
		lines = append(lines, fmt.Sprintf("%064x  %s", 1, a))
	}
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-s", "--no-print-directory", "-C", "..", "krew-manifest", "DIST_VERSION="+version,
		"DIST_DIR="+dir, "KREW_MANIFEST="+filepath.Join(dir, "karpx.yaml"))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "placeholder left unfilled") {
		t.Errorf("krew-manifest without %s's sum: err %v, output:\n%s", archives[0], err, out)
	}
}
