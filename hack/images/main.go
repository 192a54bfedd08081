// Command images writes the release container images of karpx's in-cluster
// components (karpx-controller, karpx-webhook) as image tarballs, without a
// registry or a container runtime: each image is one layer on an empty base
// holding the static binary, /etc/passwd and /etc/group naming the non-root
// user, and the LICENSE.
//
//	go run ./hack/images -version v0.1.0 -out _output/images \
//	    -binary karpx-controller=_output/images/bin/karpx-controller \
//	    -binary karpx-webhook=_output/images/bin/karpx-webhook
//
// writes _output/images/karpx-controller.tar and karpx-webhook.tar, tagged
// REPOSITORY/NAME:VERSION (-repository, default ghcr.io/karpx). The tarballs
// load with `docker load`, `podman load`, `kind load image-archive` or
// `ctr images import`, and push with `crane push`. `make images` builds the
// binaries (CGO_ENABLED=0) and runs this.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	var (
		version    = flag.String("version", "", "Image tag, the release version (required), e.g. v0.1.0.")
		out        = flag.String("out", "_output/images", "Directory the NAME.tar files are written to.")
		repository = flag.String("repository", DefaultRepository, "Repository prefix of the image references.")
		arch       = flag.String("arch", "amd64", "GOARCH the binaries were built for, recorded in the image config.")
		license    = flag.String("license", "LICENSE", "License file copied into each image as /LICENSE.")
		binaries   = map[string]string{}
	)
	flag.Func("binary", "NAME=PATH: build image NAME from the static binary at PATH (repeatable).", func(s string) error {
		name, path, ok := strings.Cut(s, "=")
		if !ok || name == "" || path == "" {
			return fmt.Errorf("want NAME=PATH, got %q", s)
		}
		binaries[name] = path
		return nil
	})
	flag.Parse()
	if err := run(*version, *out, *repository, *arch, *license, binaries); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

func run(version, out, repository, arch, licensePath string, binaries map[string]string) error {
	if version == "" {
		return fmt.Errorf("-version is required (the image tag, e.g. v0.1.0)")
	}
	if len(binaries) == 0 {
		return fmt.Errorf("no -binary NAME=PATH given")
	}
	license, err := os.ReadFile(licensePath)
	if err != nil {
		return fmt.Errorf("-license: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for name, path := range binaries {
		spec := Spec{Name: name, Version: version, Repository: repository, Arch: arch, BinaryPath: path, License: license}
		file := filepath.Join(out, name+".tar")
		if err := spec.WriteTarball(file); err != nil {
			return fmt.Errorf("image %s: %w", name, err)
		}
		fmt.Printf("%s\t%s\n", spec.Reference(), file)
	}
	return nil
}
