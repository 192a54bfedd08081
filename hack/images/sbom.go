package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/uuid"
	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
)

// SBOMSpecVersion is the CycloneDX version the SBOM is written in: 1.6, the
// newest that common scanners (Trivy, Grype, Dependency-Track) read.
const SBOMSpecVersion = cdx.SpecVersion1_6

// Property names the SBOM uses (CycloneDX properties are free-form
// name/value pairs; these are karpx's).
const (
	// PropGoVersion is the Go toolchain a binary was built with.
	PropGoVersion = "karpx:go:version"
	// PropGoPackage is a binary's main package path.
	PropGoPackage = "karpx:go:package"
	// PropGoBuildPrefix prefixes each build setting of a binary
	// (karpx:go:build:GOARCH, karpx:go:build:CGO_ENABLED, ...).
	PropGoBuildPrefix = "karpx:go:build:"
	// PropReplaces records, on a module that a replace directive put in
	// place of another, the replaced MODULE@VERSION.
	PropReplaces = "karpx:go:replaces"
	// PropPlatform is an image's or binary's OS/ARCH.
	PropPlatform = "karpx:platform"
	// PropGoSum is a module's go.sum hash, "h1:BASE64": Go's dirhash, a
	// SHA-256 over the sorted list of the module's file SHA-256s
	// (golang.org/x/mod/sumdb/dirhash Hash1), which is no hash of any file a
	// scanner could fetch, so it is a property and never a CycloneDX hash.
	PropGoSum = "karpx:go:sum"
)

// StdlibName is the component name of the Go standard library: with purl
// pkg:golang/stdlib@vX.Y.Z it is what Trivy, Grype and the Go vulnerability
// database (govulncheck's "stdlib" module) match Go's own advisories on.
const StdlibName = "stdlib"

// Module is a Go module compiled into a binary, after replace directives:
// what the SBOM lists.
type Module struct {
	// Path is the module path, e.g. "golang.org/x/sync".
	Path string
	// Version is the module version, e.g. "v0.20.0"; "(devel)" for a
	// replacement by a local directory.
	Version string
	// Sum is the go.sum hash, "h1:BASE64"; empty for a local replacement.
	Sum string
	// Replaces is MODULE@VERSION that a replace directive swapped for this
	// one, or empty.
	Replaces string
}

// Modules returns the modules compiled into a binary, from its embedded
// build info (debug/buildinfo): each dependency, or its replacement when a
// replace directive applies, in the build info's order (sorted by path).
func Modules(info *buildinfo.BuildInfo) []Module {
	var mods []Module
	for _, d := range info.Deps {
		m := Module{Path: d.Path, Version: d.Version, Sum: d.Sum}
		if r := d.Replace; r != nil {
			m = Module{Path: r.Path, Version: r.Version, Sum: r.Sum, Replaces: d.Path + "@" + d.Version}
		}
		if m.Version == "" {
			m.Version = "(devel)"
		}
		mods = append(mods, m)
	}
	return mods
}

// ZipSHA256 returns the hex SHA-256 of m's module zip in the module cache
// modCache (GOMODCACHE; its cache/download tree, as the go command writes
// it), the file the module proxy serves, after checking that the zip's
// dirhash is m.Sum, the hash the binary was built with. It returns "" and
// no error when modCache is empty, m has no sum (a local replacement) or
// the zip is not in the cache, and an error naming the zip when it cannot
// be read or its dirhash differs (a corrupt cache).
func (m Module) ZipSHA256(modCache string) (string, error) {
	if modCache == "" || m.Sum == "" {
		return "", nil
	}
	p, err := module.EscapePath(m.Path)
	if err != nil {
		return "", err
	}
	v, err := module.EscapeVersion(m.Version)
	if err != nil {
		return "", err
	}
	zip := filepath.Join(modCache, "cache", "download", p, "@v", v+".zip")
	data, err := os.ReadFile(zip)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	h1, err := dirhash.HashZip(zip, dirhash.Hash1)
	if err != nil {
		return "", fmt.Errorf("module zip %s: %w", zip, err)
	}
	if h1 != m.Sum {
		return "", fmt.Errorf("module zip %s has dirhash %s, the binary was built with %s@%s %s: the module cache is corrupt (go clean -modcache)", zip, h1, m.Path, m.Version, m.Sum)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// stdlib returns the standard library as a Module for a build info's Go
// version ("go1.26.8", possibly followed by experiment settings): path
// StdlibName, version v1.26.8 (Go's module version form, as the Go
// vulnerability database writes it).
func stdlib(goVersion string) Module {
	v := goVersion
	if f := strings.Fields(v); len(f) > 0 {
		v = f[0]
	}
	return Module{Path: StdlibName, Version: "v" + strings.TrimPrefix(v, "go")}
}

// PURL returns m's package URL, pkg:golang/PATH@VERSION?type=module, or
// pkg:golang/stdlib@VERSION for the standard library (no module type: it is
// the toolchain's).
func (m Module) PURL() string {
	if m.Path == StdlibName {
		return "pkg:golang/" + StdlibName + "@" + m.Version
	}
	return "pkg:golang/" + m.Path + "@" + m.Version + "?type=module"
}

// ociPURL returns the package URL of an image or index: pkg:oci/NAME@DIGEST
// with the repository, the tag and, for a platform image, arch and os.
func ociPURL(c Component, d v1.Hash, p *v1.Platform) string {
	q := url.Values{"repository_url": {c.Repository + "/" + c.Name}, "tag": {c.Version}}
	if p != nil {
		q.Set("arch", p.Architecture)
		q.Set("os", p.OS)
	}
	return "pkg:oci/" + c.Name + "@" + url.PathEscape(d.String()) + "?" + q.Encode()
}

// SBOM returns the CycloneDX SBOM of the built component: metadata.component
// is the image index (its digest in the purl and as its SHA-256 hash); each
// platform image is a container component that depends on its binary; each
// binary is an application component (SHA-256 of the file, Go version, main
// package and build settings as properties) that depends on the Go standard
// library (StdlibName, pkg:golang/stdlib@vX.Y.Z) and on every module in its
// build info (library components: path, version, purl, the go.sum hash as
// property PropGoSum, and as SHA-256 the hash of the module zip in
// Component.ModCache when it is there and its dirhash is that go.sum hash).
// Nothing time-dependent is recorded: the serial number is derived from the
// index digest. It returns the error reading a binary or its build info, or
// of a module zip whose dirhash differs from the build's.
func (b *Built) SBOM() (*cdx.BOM, error) {
	c := b.Component
	indexRef := ociPURL(c, b.Digest, nil)
	bom := cdx.NewBOM()
	bom.SerialNumber = uuid.NewSHA1(uuid.NameSpaceURL, []byte(indexRef)).URN()
	bom.Metadata = &cdx.Metadata{
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{Type: cdx.ComponentTypeApplication, Name: "karpx hack/images", Version: c.Version}}},
		Component: &cdx.Component{
			BOMRef: indexRef, Type: cdx.ComponentTypeContainer, Name: c.Repository + "/" + c.Name, Version: c.Version,
			PackageURL: indexRef, Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: b.Digest.Hex}},
		},
	}
	var (
		components []cdx.Component
		deps       []cdx.Dependency
		byRef      = map[string]bool{}
		images     []string
	)
	add := func(comp cdx.Component) {
		if !byRef[comp.BOMRef] {
			byRef[comp.BOMRef] = true
			components = append(components, comp)
		}
	}
	for _, img := range b.Images {
		p := img.Platform
		imgRef := ociPURL(c, img.Digest, &p)
		binRef := imgRef + "#/" + c.Name
		bin, err := os.ReadFile(img.Path)
		if err != nil {
			return nil, err
		}
		info, err := buildinfo.Read(bytes.NewReader(bin))
		if err != nil {
			return nil, fmt.Errorf("binary %s (%s): no Go build info: %w", img.Path, p, err)
		}
		sum := sha256.Sum256(bin)
		props := []cdx.Property{{Name: PropPlatform, Value: p.String()}, {Name: PropGoVersion, Value: info.GoVersion}, {Name: PropGoPackage, Value: info.Path}}
		for _, s := range info.Settings {
			props = append(props, cdx.Property{Name: PropGoBuildPrefix + s.Key, Value: s.Value})
		}
		add(cdx.Component{
			BOMRef: imgRef, Type: cdx.ComponentTypeContainer, Name: c.Repository + "/" + c.Name, Version: c.Version, PackageURL: imgRef,
			Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: img.Digest.Hex}}, Properties: &[]cdx.Property{{Name: PropPlatform, Value: p.String()}},
		})
		add(cdx.Component{
			BOMRef: binRef, Type: cdx.ComponentTypeApplication, Name: c.Name, Version: c.Version,
			Hashes: &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(sum[:])}}, Properties: &props,
		})
		std := stdlib(info.GoVersion)
		add(cdx.Component{BOMRef: std.PURL(), Type: cdx.ComponentTypeLibrary, Name: std.Path, Version: std.Version, PackageURL: std.PURL()})
		binDeps := []string{std.PURL()}
		for _, m := range Modules(info) {
			comp := cdx.Component{BOMRef: m.PURL(), Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: m.PURL(), Scope: cdx.ScopeRequired}
			h, err := m.ZipSHA256(c.ModCache)
			if err != nil {
				return nil, err
			}
			if h != "" {
				comp.Hashes = &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: h}}
			}
			var props []cdx.Property
			if m.Sum != "" {
				props = append(props, cdx.Property{Name: PropGoSum, Value: m.Sum})
			}
			if m.Replaces != "" {
				props = append(props, cdx.Property{Name: PropReplaces, Value: m.Replaces})
			}
			if len(props) > 0 {
				comp.Properties = &props
			}
			add(comp)
			binDeps = append(binDeps, m.PURL())
		}
		slices.Sort(binDeps)
		deps = append(deps, cdx.Dependency{Ref: imgRef, Dependencies: &[]string{binRef}}, cdx.Dependency{Ref: binRef, Dependencies: &binDeps})
		images = append(images, imgRef)
	}
	slices.SortFunc(components, func(a, b cdx.Component) int { return strings.Compare(a.BOMRef, b.BOMRef) })
	deps = append(deps, cdx.Dependency{Ref: indexRef, Dependencies: &images})
	slices.SortFunc(deps, func(a, b cdx.Dependency) int { return strings.Compare(a.Ref, b.Ref) })
	bom.Components, bom.Dependencies = &components, &deps
	return bom, nil
}

// SBOMJSON returns Built.SBOM encoded as CycloneDX SBOMSpecVersion JSON,
// indented.
func (b *Built) SBOMJSON() ([]byte, error) {
	bom, err := b.SBOM()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := cdx.NewBOMEncoder(&buf, cdx.BOMFileFormatJSON).SetPretty(true).EncodeVersion(bom, SBOMSpecVersion); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
