package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// imagesDir is where `make images` writes the images, relative to this
// package.
const imagesDir = "../../_output/images"

// wantPlatforms are the platforms every index lists, in order.
var wantPlatforms = []string{"linux/amd64", "linux/arm64"}

// elfMachine is the ELF machine of a binary built for each GOARCH.
var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

var (
	tinyOnce sync.Once
	tinyDir  string
	tinyErr  error
)

// tinyBinaries cross-builds testdata/tinybin (one module dependency) for
// each of wantPlatforms with the release flags of `make images`, once per
// test binary, into BIN-DIR/OS_ARCH/karpx-controller, and returns BIN-DIR.
func tinyBinaries(t *testing.T) string {
	t.Helper()
	tinyOnce.Do(func() {
		tinyDir, tinyErr = os.MkdirTemp("", "images-tinybin")
		for _, p := range wantPlatforms {
			if tinyErr != nil {
				return
			}
			goos, arch, _ := strings.Cut(p, "/")
			cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w",
				"-o", filepath.Join(tinyDir, goos+"_"+arch, "karpx-controller"), "./testdata/tinybin")
			cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+arch, "GOFLAGS=-buildvcs=false")
			if out, err := cmd.CombinedOutput(); err != nil {
				tinyErr = fmt.Errorf("go build for %s: %v\n%s", p, err, out)
			}
		}
	})
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyDir
}

// tinyComponent is a karpx-controller component of the tiny binaries.
func tinyComponent(t *testing.T, version string) Component {
	t.Helper()
	dir := tinyBinaries(t)
	c := Component{Name: "karpx-controller", Version: version, Repository: DefaultRepository, License: []byte("Apache"), ModCache: goModCache(t)}
	for _, p := range wantPlatforms {
		plat, err := v1.ParsePlatform(p)
		if err != nil {
			t.Fatal(err)
		}
		c.Binaries = append(c.Binaries, Binary{Platform: *plat, Path: filepath.Join(dir, strings.ReplaceAll(p, "/", "_"), "karpx-controller")})
	}
	return c
}

// layerFile is one regular file of an image's layers.
type layerFile struct {
	hdr  *tar.Header
	data []byte
}

// layerFiles returns every entry of img's layers by absolute path.
func layerFiles(t *testing.T, img v1.Image) map[string]layerFile {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]layerFile{}
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
			files[filepath.Clean("/"+hdr.Name)] = layerFile{hdr, data}
		}
		rc.Close()
	}
	return files
}

// checkImage asserts what every karpx image must be for platform p:
// entrypoint /NAME, the numeric non-root user 65532:65532, OS and
// architecture p, the binary present, executable and built for p's
// architecture, and nothing in the image writable by the non-root user (so
// a read-only root filesystem takes nothing away). It returns the binary.
func checkImage(t *testing.T, img v1.Image, name string, p v1.Platform) []byte {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/" + name}; !slices.Equal(cfg.Config.Entrypoint, want) {
		t.Errorf("%s %s: entrypoint %q, want %q", name, p, cfg.Config.Entrypoint, want)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("%s %s: user %q, want the numeric non-root 65532:65532", name, p, cfg.Config.User)
	}
	if cfg.OS != p.OS || cfg.Architecture != p.Architecture {
		t.Errorf("%s %s: config os/arch %s/%s", name, p, cfg.OS, cfg.Architecture)
	}
	files := layerFiles(t, img)
	for path, f := range files {
		if f.hdr.Uid != 0 || f.hdr.Mode&0o022 != 0 {
			t.Errorf("%s %s: %s uid %d mode %o: writable by the non-root user; the root filesystem is read-only", name, p, path, f.hdr.Uid, f.hdr.Mode)
		}
	}
	bin, ok := files["/"+name]
	if !ok {
		t.Fatalf("%s %s: /%s not in the image; files: %v", name, p, name, slices.Sorted(func(yield func(string) bool) {
			for k := range files {
				if !yield(k) {
					return
				}
			}
		}))
	}
	if bin.hdr.Mode&0o111 == 0 {
		t.Errorf("%s %s: /%s mode %o, want executable", name, p, name, bin.hdr.Mode)
	}
	if !bytes.Contains(files["/etc/passwd"].data, []byte("nonroot:x:65532:65532:")) {
		t.Errorf("%s %s: /etc/passwd lacks the nonroot user: %q", name, p, files["/etc/passwd"].data)
	}
	f, err := elf.NewFile(bytes.NewReader(bin.data))
	if err != nil {
		t.Fatalf("%s %s: not an ELF binary: %v", name, p, err)
	}
	if want := elfMachine[p.Architecture]; f.Machine != want {
		t.Errorf("%s %s: binary is for %v, want %v", name, p, f.Machine, want)
	}
	return bin.data
}

// readLayout opens the OCI layout dir and returns its image index (the
// index.json entry named version) and the SBOM referrer's descriptor,
// failing t unless index.json holds exactly those two entries.
func readLayout(t *testing.T, dir, ref, version string) (v1.ImageIndex, v1.Descriptor, v1.Descriptor) {
	t.Helper()
	l, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := l.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 2 {
		t.Fatalf("%s/index.json lists %d entries, want the image index and its SBOM referrer", dir, len(m.Manifests))
	}
	idxDesc, sbomDesc := m.Manifests[0], m.Manifests[1]
	if idxDesc.MediaType != types.OCIImageIndex || idxDesc.Annotations[ocispec.AnnotationRefName] != version || idxDesc.Annotations[ContainerdImageName] != ref {
		t.Errorf("index entry %+v, want an OCI index named %s (%s)", idxDesc, version, ref)
	}
	if sbomDesc.ArtifactType != SBOMArtifactType || sbomDesc.Annotations[ContainerdImageName] != "" {
		t.Errorf("SBOM entry %+v, want artifactType %s and no image name", sbomDesc, SBOMArtifactType)
	}
	idx, err := l.ImageIndex(idxDesc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx, idxDesc, sbomDesc
}

// checkIndex fails t unless idx lists exactly want (platforms, in order),
// each a valid karpx image, and returns each platform's binary.
func checkIndex(t *testing.T, idx v1.ImageIndex, name string, want []string) map[string][]byte {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	bins := map[string][]byte{}
	for _, d := range im.Manifests {
		if d.Platform == nil {
			t.Fatalf("%s: index entry %s has no platform", name, d.Digest)
		}
		got = append(got, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		bins[d.Platform.String()] = checkImage(t, img, name, *d.Platform)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: index platforms %v, want exactly %v", name, got, want)
	}
	return bins
}

// checkSBOM parses the SBOM file with the CycloneDX library and fails t
// unless it describes index digest idx and, for each platform's binary in
// bins, lists exactly the modules of that binary's build info (path,
// version, go.sum hash), its Go version and its SHA-256. It also checks the
// SBOM referrer in the layout holds the same bytes and has the index as
// subject.
func checkSBOM(t *testing.T, file, layoutDir string, idx v1.Descriptor, referrer v1.Descriptor, bins map[string][]byte) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(raw), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatalf("%s does not parse as CycloneDX JSON: %v", file, err)
	}
	if bom.SpecVersion != SBOMSpecVersion || bom.Metadata == nil || bom.Metadata.Component == nil || bom.Metadata.Component.Hashes == nil {
		t.Fatalf("%s: spec %v metadata %+v", file, bom.SpecVersion, bom.Metadata)
	}
	if h := *bom.Metadata.Component.Hashes; len(h) != 1 || h[0].Value != idx.Digest.Hex || !strings.Contains(bom.Metadata.Component.PackageURL, idx.Digest.Hex) {
		t.Errorf("%s: describes %v %s, want the index %s", file, h, bom.Metadata.Component.PackageURL, idx.Digest)
	}
	comps := map[string]cdx.Component{}
	for _, c := range *bom.Components {
		comps[c.BOMRef] = c
	}
	deps := map[string][]string{}
	for _, d := range *bom.Dependencies {
		deps[d.Ref] = *d.Dependencies
	}
	prop := func(c cdx.Component, name string) string {
		if c.Properties == nil {
			return ""
		}
		for _, p := range *c.Properties {
			if p.Name == name {
				return p.Value
			}
		}
		return ""
	}
	if got := len(deps[bom.Metadata.Component.BOMRef]); got != len(bins) {
		t.Errorf("%s: the index depends on %d images, want %d", file, got, len(bins))
	}
	seen := 0
	for _, imgRef := range deps[bom.Metadata.Component.BOMRef] {
		for _, binRef := range deps[imgRef] {
			bin := comps[binRef]
			plat := prop(bin, PropPlatform)
			data, ok := bins[plat]
			if !ok {
				t.Errorf("%s: binary component for platform %q, not in the index", file, plat)
				continue
			}
			seen++
			info, err := buildinfo.Read(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			if prop(bin, PropGoVersion) != info.GoVersion || prop(bin, PropGoBuildPrefix+"GOARCH") != strings.TrimPrefix(plat, "linux/") {
				t.Errorf("%s %s: go %q GOARCH %q, build info says %s", file, plat, prop(bin, PropGoVersion), prop(bin, PropGoBuildPrefix+"GOARCH"), info.GoVersion)
			}
			var got []string
			stdlibs := 0
			for _, ref := range deps[binRef] {
				c := comps[ref]
				if c.Name == StdlibName {
					stdlibs++
					want := "pkg:golang/stdlib@v" + strings.TrimPrefix(info.GoVersion, "go")
					if c.PackageURL != want || c.BOMRef != want || c.Version != strings.TrimPrefix(want, "pkg:golang/stdlib@") {
						t.Errorf("%s %s: standard library %s %s (purl %s), want purl %s (Go %s)", file, plat, c.Name, c.Version, c.PackageURL, want, info.GoVersion)
					}
					continue
				}
				got = append(got, c.Name+"@"+c.Version+" "+prop(c, PropGoSum))
				checkModuleHash(t, file, c, prop(c, PropGoSum))
			}
			if stdlibs != 1 {
				t.Errorf("%s %s: depends on %d standard-library components named %q, want 1", file, plat, stdlibs, StdlibName)
			}
			var want []string
			for _, d := range info.Deps {
				if d.Replace != nil {
					d = d.Replace
				}
				want = append(want, d.Path+"@"+d.Version+" "+d.Sum)
			}
			slices.Sort(got)
			slices.Sort(want)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Errorf("%s %s: SBOM modules\n%v\nbuild info modules\n%v", file, plat, got, want)
			}
		}
	}
	if seen != len(bins) {
		t.Errorf("%s: %d binaries described, want %d", file, seen, len(bins))
	}

	l, err := layout.FromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	mraw, err := l.Bytes(referrer.Digest)
	if err != nil {
		t.Fatal(err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mraw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Subject == nil || m.Subject.Digest.String() != idx.Digest.String() || m.ArtifactType != SBOMArtifactType || len(m.Layers) != 1 {
		t.Fatalf("SBOM referrer %s, want subject %s", mraw, idx.Digest)
	}
	h, err := v1.NewHash(m.Layers[0].Digest.String())
	if err != nil {
		t.Fatal(err)
	}
	layer, err := l.Bytes(h)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(layer, raw) {
		t.Errorf("the SBOM referrer's layer differs from %s", file)
	}
}

func TestComponentIndexPlatformsUserAndSBOM(t *testing.T) {
	c := tinyComponent(t, "v1.2.3")
	out := t.TempDir()
	w, err := c.Write(out)
	if err != nil {
		t.Fatal(err)
	}
	idx, idxDesc, sbomDesc := readLayout(t, w.Layout, "ghcr.io/karpx/karpx-controller:v1.2.3", "v1.2.3")
	if idxDesc.Digest != w.Digest || sbomDesc.Digest != w.SBOMDigest {
		t.Errorf("layout lists %s and %s, Write returned %s and %s", idxDesc.Digest, sbomDesc.Digest, w.Digest, w.SBOMDigest)
	}
	bins := checkIndex(t, idx, "karpx-controller", wantPlatforms)
	for _, b := range c.Binaries {
		want, err := os.ReadFile(b.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bins[b.Platform.String()], want) {
			t.Errorf("%s: the image's binary is not %s", b.Platform, b.Path)
		}
	}
	checkSBOM(t, w.SBOM, w.Layout, idxDesc, sbomDesc, bins)
	if _, err := os.Stat(w.Archive); err != nil {
		t.Error(err)
	}
}

func TestComponentReproducibleDigests(t *testing.T) {
	c := tinyComponent(t, "v1.2.3")
	a, err := c.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != b.Digest || a.SBOMDigest != b.SBOMDigest {
		t.Errorf("digests not reproducible: index %s then %s, SBOM %s then %s", a.Digest, b.Digest, a.SBOMDigest, b.SBOMDigest)
	}
	for _, pair := range [][2]string{{a.Archive, b.Archive}, {a.SBOM, b.SBOM}} {
		x, _ := os.ReadFile(pair[0])
		y, _ := os.ReadFile(pair[1])
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s and %s differ (%d, %d bytes)", pair[0], pair[1], len(x), len(y))
		}
	}
	// Another version is another image: the digest covers the tag's label.
	c.Version = "v1.2.4"
	d, err := c.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if d.Digest == a.Digest {
		t.Errorf("v1.2.3 and v1.2.4 have the same index digest %s", a.Digest)
	}
}

func TestVersionIsTheReleaseNeverLatest(t *testing.T) {
	c := tinyComponent(t, "latest")
	for _, tc := range []struct{ version, want string }{
		{"latest", "never latest"},
		{"", "release version"},
		{"v1.2.3!", "image reference"},
	} {
		c.Version = tc.version
		if _, err := c.Build(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("version %q: error %v, want one containing %q", tc.version, err, tc.want)
		}
	}
	err := run("latest", t.TempDir(), DefaultRepository, tinyBinaries(t), "../../LICENSE", "", wantPlatforms, []string{"karpx-controller"})
	if err == nil || !strings.Contains(err.Error(), "never latest") {
		t.Errorf("-version latest: %v, want refused", err)
	}
	c.Version = "v1.2.3"
	c.Binaries = append(c.Binaries, c.Binaries[0])
	if _, err := c.Build(); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("duplicate platform: %v", err)
	}
}

// releaseVersion matches the versions `make images` tags with: DIST_VERSION
// from git describe (vX.Y.Z[-N-gHASH][-dirty]) or v0.0.0-gHASH without a tag.
var releaseVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// builtPlatforms reads the platforms `make images` built (IMAGE_PLATFORMS,
// in its platforms file: every release platform for a release, this
// machine's alone in CI) and fails t unless they are a non-empty part of
// wantPlatforms in its order.
func builtPlatforms(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(imagesDir, "platforms"))
	if err != nil {
		t.Fatalf("%v: make images writes it beside the indexes; run it again", err)
	}
	built := strings.Fields(string(data))
	var inOrder []string
	for _, p := range wantPlatforms {
		if slices.Contains(built, p) {
			inOrder = append(inOrder, p)
		}
	}
	if len(built) == 0 || !slices.Equal(built, inOrder) {
		t.Fatalf("make images built %v: want a non-empty part of the release platforms %v, in that order", built, wantPlatforms)
	}
	return built
}

// TestReleaseImages reads what `make images` wrote (.ci/run builds it
// first): per component, an index of exactly the platforms it built (the
// release's linux/amd64 and linux/arm64, or a part of them) tagged with the release version, images that run as 65532 with nothing
// writable, static CGO_ENABLED=0 binaries carrying the fallback CA roots,
// an SBOM that matches their build info, and the overlay running that tag.
func TestReleaseImages(t *testing.T) {
	for _, name := range []string{"karpx-controller", "karpx-webhook"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(imagesDir, name)
			if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
				t.Skipf("%s missing: run `make images` (.ci/run does, before make test)", dir)
			}
			l, err := layout.ImageIndexFromPath(dir)
			if err != nil {
				t.Fatal(err)
			}
			m, err := l.IndexManifest()
			if err != nil || len(m.Manifests) == 0 {
				t.Fatalf("%s/index.json: %v %+v", dir, err, m)
			}
			version := m.Manifests[0].Annotations[ocispec.AnnotationRefName]
			ref := m.Manifests[0].Annotations[ContainerdImageName]
			if version == "latest" || !releaseVersion.MatchString(version) || !strings.HasSuffix(ref, "/karpx/"+name+":"+version) {
				t.Errorf("tagged %s (%s): want REGISTRY/karpx/%s:VERSION, the release version, never latest", version, ref, name)
			}
			idx, idxDesc, sbomDesc := readLayout(t, dir, ref, version)
			built := builtPlatforms(t)
			bins := checkIndex(t, idx, name, built)
			for p, bin := range bins {
				checkStaticGoBinary(t, name+" "+p, bin)
			}
			checkSBOM(t, filepath.Join(imagesDir, name+".cdx.json"), dir, idxDesc, sbomDesc, bins)
			checkOverlayImage(t, strings.TrimPrefix(name, "karpx-"), ref)
		})
	}
}

// checkOverlayImage builds the kustomize overlay `make images` wrote for
// component (controller, webhook) and fails t unless its Deployment runs
// exactly tag, the image in the layout.
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
		t.Errorf("kustomize build %s runs images %v, want exactly the layout's %s", dir, images, tag)
	}
}

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

// goModCache returns `go env GOMODCACHE`, the module cache the test
// binaries are built from.
func goModCache(t *testing.T) string {
	t.Helper()
	mc, err := moduleCache("")
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// checkModuleHash fails t unless module component c's hashes are exactly
// what a scanner may check: none, or one SHA-256 that is the SHA-256 of the
// module's zip in the module cache, a zip whose dirhash is sum (the go.sum
// hash the binary was built with, given as a property). When the cache
// holds the zip the hash must be there. A go.sum hash itself (base64 or
// hex) labelled SHA-256, what the SBOM said before, fails.
func checkModuleHash(t *testing.T, file string, c cdx.Component, sum string) {
	t.Helper()
	if !strings.HasPrefix(sum, "h1:") {
		t.Errorf("%s: module %s@%s: property %s %q, want the go.sum h1: hash", file, c.Name, c.Version, PropGoSum, sum)
		return
	}
	zip := filepath.Join(goModCache(t), "cache", "download", modulePath(t, c.Name), "@v", c.Version+".zip")
	data, err := os.ReadFile(zip)
	if err != nil {
		if c.Hashes != nil {
			t.Errorf("%s: module %s@%s has hashes %v but no zip in the module cache (%v)", file, c.Name, c.Version, *c.Hashes, err)
		}
		return
	}
	zipSum := sha256.Sum256(data)
	if c.Hashes == nil || len(*c.Hashes) != 1 || (*c.Hashes)[0].Algorithm != cdx.HashAlgoSHA256 || (*c.Hashes)[0].Value != hex.EncodeToString(zipSum[:]) {
		t.Errorf("%s: module %s@%s hashes %v, want one SHA-256 %x (its module zip %s)", file, c.Name, c.Version, c.Hashes, zipSum, zip)
		if c.Hashes == nil {
			return
		}
	}
	if h1, err := dirhash.HashZip(zip, dirhash.Hash1); err != nil || h1 != sum {
		t.Errorf("%s: module %s@%s: zip dirhash %s (%v), the SBOM's go.sum hash %s", file, c.Name, c.Version, h1, err, sum)
	}
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(sum, "h1:"))
	for _, h := range *c.Hashes {
		if h.Value == hex.EncodeToString(raw) || h.Value == strings.TrimPrefix(sum, "h1:") {
			t.Errorf("%s: module %s@%s: the go.sum hash is labelled %s", file, c.Name, c.Version, h.Algorithm)
		}
	}
}

// modulePath returns the module cache's escaped form of path.
func modulePath(t *testing.T, path string) string {
	t.Helper()
	p, err := module.EscapePath(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
