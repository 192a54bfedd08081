package main

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// imagesDir is where `make images` writes the tarballs, relative to this
// package.
const imagesDir = "../../_output/images"

// layerFiles returns the regular files of img's layers by path, with their
// headers and contents.
func layerFiles(t *testing.T, img v1.Image) map[string]struct {
	hdr  *tar.Header
	data []byte
} {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]struct {
		hdr  *tar.Header
		data []byte
	}{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[filepath.Clean("/"+hdr.Name)] = struct {
				hdr  *tar.Header
				data []byte
			}{hdr, data}
		}
		rc.Close()
	}
	return files
}

// checkImage asserts what every karpx image must be: entrypoint /NAME, a
// numeric non-root user, the binary present and executable, owned by root.
// It returns the binary's bytes.
func checkImage(t *testing.T, img v1.Image, name string) []byte {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/" + name}; !slices.Equal(cfg.Config.Entrypoint, want) {
		t.Errorf("%s: entrypoint %q, want %q", name, cfg.Config.Entrypoint, want)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("%s: user %q, want the numeric non-root 65532:65532", name, cfg.Config.User)
	}
	if cfg.OS != "linux" {
		t.Errorf("%s: os %q", name, cfg.OS)
	}
	files := layerFiles(t, img)
	bin, ok := files["/"+name]
	if !ok {
		t.Fatalf("%s: /%s not in the image; files: %v", name, name, keys(files))
	}
	if bin.hdr.Mode&0o111 == 0 || bin.hdr.Mode&0o022 != 0 || bin.hdr.Uid != 0 {
		t.Errorf("%s: /%s mode %o uid %d, want executable, not writable by others, owned by root", name, name, bin.hdr.Mode, bin.hdr.Uid)
	}
	if !bytes.Contains(files["/etc/passwd"].data, []byte("nonroot:x:65532:65532:")) {
		t.Errorf("%s: /etc/passwd lacks the nonroot user: %q", name, files["/etc/passwd"].data)
	}
	return bin.data
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestSpecImage(t *testing.T) {
	dir := t.TempDir()
	binPath := filepath.Join(dir, "karpx-controller")
	if err := os.WriteFile(binPath, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Name: "karpx-controller", Version: "v1.2.3", Repository: DefaultRepository, Arch: "arm64", BinaryPath: binPath, License: []byte("Apache")}
	file := filepath.Join(dir, "img.tar")
	if err := spec.WriteTarball(file); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag("ghcr.io/karpx/karpx-controller:v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(file, &tag)
	if err != nil {
		t.Fatalf("the tarball does not hold %s: %v", tag, err)
	}
	if got := checkImage(t, img, "karpx-controller"); string(got) != "\x7fELF not really" {
		t.Errorf("binary = %q", got)
	}
	cfg, _ := img.ConfigFile()
	if cfg.Architecture != "arm64" || cfg.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" {
		t.Errorf("config: arch %q labels %v", cfg.Architecture, cfg.Config.Labels)
	}

	// Same inputs, same digest: nothing time- or host-dependent is recorded.
	first, err := spec.Image()
	if err != nil {
		t.Fatal(err)
	}
	again, err := spec.Image()
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := first.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("image digest not reproducible: %s then %s", d1, d2)
	}
	c1, _ := first.ConfigName()
	c2, _ := img.ConfigName()
	if c1 != c2 {
		t.Errorf("config digest %s in the tarball, %s built", c2, c1)
	}

	if err := (Spec{Name: "x", Version: "latest!", Repository: DefaultRepository, BinaryPath: binPath}).WriteTarball(file); err == nil {
		t.Error("invalid tag accepted")
	}
}

// TestReleaseImages reads the tarballs `make images` wrote (make test builds
// them first) and checks each: entrypoint, non-root user, and a static Linux
// binary built without cgo that carries the fallback CA roots.
func TestReleaseImages(t *testing.T) {
	for _, name := range []string{"karpx-controller", "karpx-webhook"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(imagesDir, name+".tar")
			if _, err := os.Stat(file); err != nil {
				t.Skipf("%s missing: run `make images` (make test does)", file)
			}
			m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(file) })
			if err != nil {
				t.Fatal(err)
			}
			if len(m) != 1 || len(m[0].RepoTags) != 1 {
				t.Fatalf("manifest %+v, want one image with one tag", m)
			}
			ref, err := nameTag(m[0].RepoTags[0])
			if err != nil {
				t.Fatal(err)
			}
			if ref.RepositoryStr() != "karpx/"+name || ref.TagStr() == "latest" {
				t.Errorf("tag %s: want REGISTRY/karpx/%s:VERSION", ref, name)
			}
			img, err := tarball.ImageFromPath(file, nil)
			if err != nil {
				t.Fatal(err)
			}
			bin := checkImage(t, img, name)
			checkStaticGoBinary(t, name, bin)
			checkOverlayImage(t, strings.TrimPrefix(name, "karpx-"), m[0].RepoTags[0])
		})
	}
}

// checkOverlayImage builds the kustomize overlay `make images` wrote for
// component (controller, webhook) and fails t unless its Deployment runs
// exactly tag, the image in the tarball.
func checkOverlayImage(t *testing.T, component, tag string) {
	t.Helper()
	dir := filepath.Join(imagesDir, "manifests", component)
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var images []string
	for _, r := range res.Resources() {
		if r.GetKind() != "Deployment" {
			continue
		}
		containers, err := r.GetSlice("spec.template.spec.containers")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range containers {
			if m, ok := c.(map[string]any); ok {
				images = append(images, fmt.Sprint(m["image"]))
			}
		}
	}
	if len(images) != 1 || images[0] != tag {
		t.Errorf("kustomize build %s runs images %v, want exactly the tarball's %s", dir, images, tag)
	}
}

func nameTag(s string) (name.Tag, error) { return name.NewTag(s, name.StrictValidation) }

// checkStaticGoBinary fails t unless bin is a Linux ELF executable with no
// program interpreter (statically linked), built with CGO_ENABLED=0 and
// linking golang.org/x/crypto/x509roots/fallback.
func checkStaticGoBinary(t *testing.T, name string, bin []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("%s: not an ELF binary: %v", name, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: dynamically linked (program header %v): it cannot run on an empty base", name, p.Type)
		}
	}
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("%s: no Go build info: %v", name, err)
	}
	cgo := ""
	for _, s := range info.Settings {
		if s.Key == "CGO_ENABLED" {
			cgo = s.Value
		}
	}
	if cgo != "0" {
		t.Errorf("%s: CGO_ENABLED=%q, want 0", name, cgo)
	}
	if !slices.ContainsFunc(info.Deps, func(m *debug.Module) bool { return m.Path == "golang.org/x/crypto/x509roots/fallback" }) {
		t.Errorf("%s: does not link golang.org/x/crypto/x509roots/fallback: TLS to AWS would fail on an empty base (no /etc/ssl)", name)
	}
}
