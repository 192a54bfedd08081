package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func main() {
	var (
		version    = flag.String("version", "", "Image tag, the release version (required, never latest), e.g. v0.1.0.")
		out        = flag.String("out", "_output/images", "Directory the layouts, NAME.tar and NAME.cdx.json files are written to.")
		repository = flag.String("repository", DefaultRepository, "Repository prefix of the image references.")
		binDir     = flag.String("bin-dir", "_output/images/bin", "Directory holding OS_ARCH/NAME, the static binary of each platform and component.")
		platforms  = flag.String("platforms", "linux/amd64,linux/arm64", "Comma-separated OS/ARCH list: the platforms of each image index, in this order.")
		components = flag.String("components", "karpx-controller,karpx-webhook", "Comma-separated component (binary) names: one image index each.")
		license    = flag.String("license", "LICENSE", "License file copied into each image as /LICENSE.")
		modCache   = flag.String("modcache", "", "Go module cache the binaries were built from, for the SHA-256 of each module zip in the SBOM; empty asks `go env GOMODCACHE`, \"none\" records go.sum hashes only.")
	)
	flag.Parse()
	mc, err := moduleCache(*modCache)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: -modcache: %v\n", err)
		os.Exit(1)
	}
	if err := run(*version, *out, *repository, *binDir, *license, mc, split(*platforms), split(*components)); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

// split returns the non-empty comma- or space-separated fields of s.
func split(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
}

// moduleCache returns flag's module cache: flag itself, "" for "none", or
// what `go env GOMODCACHE` prints when flag is empty.
func moduleCache(flag string) (string, error) {
	switch flag {
	case "none":
		return "", nil
	case "":
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			return "", fmt.Errorf("go env GOMODCACHE: %w (give -modcache DIR or -modcache none)", err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	return flag, nil
}

func run(version, out, repository, binDir, licensePath, modCache string, platforms, components []string) error {
	if len(components) == 0 {
		return fmt.Errorf("-components is empty: give the binary names, e.g. karpx-controller,karpx-webhook")
	}
	if len(platforms) == 0 {
		return fmt.Errorf("-platforms is empty: give OS/ARCH values, e.g. linux/amd64,linux/arm64")
	}
	var plats []v1.Platform
	for _, p := range platforms {
		plat, err := v1.ParsePlatform(p)
		if err != nil || plat.OS == "" || plat.Architecture == "" {
			return fmt.Errorf("-platforms: %q is not OS/ARCH, e.g. linux/arm64", p)
		}
		plats = append(plats, *plat)
	}
	license, err := os.ReadFile(licensePath)
	if err != nil {
		return fmt.Errorf("-license: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, name := range components {
		c := Component{Name: name, Version: version, Repository: repository, License: license, ModCache: modCache}
		for _, p := range plats {
			c.Binaries = append(c.Binaries, Binary{Platform: p, Path: filepath.Join(binDir, p.OS+"_"+p.Architecture, name)})
		}
		w, err := c.Write(out)
		if err != nil {
			return err
		}
		fmt.Printf("%s@%s\t%s\t%s\t%s\t%s\n", w.Reference, w.Digest, w.Archive, w.Layout, w.SBOM, w.Provenance)
	}
	return nil
}
