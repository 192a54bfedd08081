package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/uuid"
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
)

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

// SHA256 returns the hex SHA-256 that m's go.sum hash encodes ("h1:" is
// base64 of a SHA-256 over the module's file hashes, Go's dirhash), or "" for
// no or another kind of sum.
func (m Module) SHA256() string {
	b64, ok := strings.CutPrefix(m.Sum, "h1:")
	if !ok {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != sha256.Size {
		return ""
	}
	return hex.EncodeToString(raw)
}

// PURL returns m's package URL, pkg:golang/PATH@VERSION?type=module.
func (m Module) PURL() string { return "pkg:golang/" + m.Path + "@" + m.Version + "?type=module" }

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
// library ("std" at the Go version) and on every module in its build info
// (library components: path, version, purl, the go.sum hash as SHA-256).
// Nothing time- or host-dependent is recorded: the serial number is derived
// from the index digest. It returns the error reading a binary or its build
// info.
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
		std := Module{Path: "std", Version: info.GoVersion}
		add(cdx.Component{BOMRef: std.PURL(), Type: cdx.ComponentTypeLibrary, Name: std.Path, Version: std.Version, PackageURL: std.PURL()})
		binDeps := []string{std.PURL()}
		for _, m := range Modules(info) {
			comp := cdx.Component{BOMRef: m.PURL(), Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: m.PURL(), Scope: cdx.ScopeRequired}
			if h := m.SHA256(); h != "" {
				comp.Hashes = &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: h}}
			}
			if m.Replaces != "" {
				comp.Properties = &[]cdx.Property{{Name: PropReplaces, Value: m.Replaces}}
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
