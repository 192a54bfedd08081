package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// ContainerdImageName is the annotation on an index.json entry that
// containerd (ctr images import, kind load image-archive) and docker load
// read as the full image reference to create.
const ContainerdImageName = "io.containerd.image.name"

// SBOMArtifactType is the artifactType of the SBOM referrer manifest and the
// media type of its one layer, the CycloneDX JSON document (CycloneDX's
// registered media type).
const SBOMArtifactType = "application/vnd.cyclonedx+json"

// Component is one image name built for several platforms into one OCI
// image index.
type Component struct {
	// Name is the component and binary name, e.g. "karpx-controller".
	Name string
	// Version is the image tag, the release version (e.g. "v0.1.0"); never
	// empty or "latest".
	Version string
	// Repository prefixes the reference: REPOSITORY/NAME:VERSION.
	Repository string
	// License is copied to /LICENSE in every image.
	License []byte
	// Binaries are the component's static binaries, one per platform, in the
	// order the index lists them.
	Binaries []Binary
	// ModCache is the Go module cache (GOMODCACHE) the binaries were built
	// from: the SBOM gives each module the SHA-256 of its zip there; empty
	// for none (the go.sum hash stays, as a property).
	ModCache string
}

// Binary is a component's static binary for one platform.
type Binary struct {
	// Platform is the GOOS/GOARCH the binary was built for.
	Platform v1.Platform
	// Path is the binary's file.
	Path string
}

// PlatformImage is one platform's image of a built component.
type PlatformImage struct {
	Binary
	// Image is the single-platform image.
	Image v1.Image
	// Digest is the image manifest's digest, as the index lists it.
	Digest v1.Hash
}

// Built is a component built in memory: its index and the images in it.
type Built struct {
	// Component is what was built.
	Component Component
	// Index is the OCI image index listing Images with their platforms.
	Index v1.ImageIndex
	// Digest is Index's digest, what REPOSITORY/NAME:VERSION resolves to.
	Digest v1.Hash
	// Images are the per-platform images in Component.Binaries order.
	Images []PlatformImage
}

// Written is what Component.Write wrote.
type Written struct {
	// Reference is REPOSITORY/NAME:VERSION.
	Reference string
	// Digest is the image index's digest.
	Digest v1.Hash
	// SBOMDigest is the digest of the SBOM referrer manifest, whose subject
	// is the index.
	SBOMDigest v1.Hash
	// Layout is the OCI image layout directory, OUT/NAME.
	Layout string
	// Archive is the same layout as a tar (an "oci-archive"), OUT/NAME.tar.
	Archive string
	// SBOM is the CycloneDX JSON file, OUT/NAME.cdx.json.
	SBOM string
	// Provenance is the in-toto Statement v1 with the SLSA Provenance v1
	// predicate (Built.Provenance), OUT/NAME.intoto.json, beside Archive.
	Provenance string
}

// Reference returns REPOSITORY/NAME:VERSION.
func (c Component) Reference() string { return c.Repository + "/" + c.Name + ":" + c.Version }

// validate returns an error naming the field and the fix when c cannot be
// built.
func (c Component) validate() error {
	switch {
	case c.Version == "":
		return errors.New("version is empty: set it to the release version (DIST_VERSION, git describe), e.g. v0.1.0")
	case c.Version == "latest":
		return errors.New(`version "latest": images are tagged with the release version (DIST_VERSION, git describe), never latest`)
	case len(c.Binaries) == 0:
		return fmt.Errorf("image %s: no binaries: give one per platform", c.Name)
	}
	if _, err := name.NewTag(c.Reference(), name.StrictValidation); err != nil {
		return fmt.Errorf("image reference %q (repository %q, name %q, version %q): %w", c.Reference(), c.Repository, c.Name, c.Version, err)
	}
	seen := map[string]bool{}
	for _, b := range c.Binaries {
		p := b.Platform.String()
		if b.Platform.OS == "" || b.Platform.Architecture == "" {
			return fmt.Errorf("image %s: binary %s: platform %q lacks an OS or architecture, want e.g. linux/amd64", c.Name, b.Path, p)
		}
		if seen[p] {
			return fmt.Errorf("image %s: platform %s given twice", c.Name, p)
		}
		seen[p] = true
	}
	return nil
}

// Build builds each platform's image and the index listing them with their
// platforms (OCI media types). The same binaries, license and version give
// the same digests. It returns an error naming the field for invalid input,
// or the error reading a binary.
func (c Component) Build() (*Built, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	built := &Built{Component: c}
	var adds []mutate.IndexAddendum
	for _, b := range c.Binaries {
		img, err := Spec{Name: c.Name, Version: c.Version, Platform: b.Platform, BinaryPath: b.Path, License: c.License}.Image()
		if err != nil {
			return nil, fmt.Errorf("image %s for %s: %w", c.Name, b.Platform, err)
		}
		d, err := img.Digest()
		if err != nil {
			return nil, err
		}
		built.Images = append(built.Images, PlatformImage{Binary: b, Image: img, Digest: d})
		p := b.Platform
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	idx, ok := mutate.Annotations(idx, map[string]string{
		ocispec.AnnotationTitle:   c.Name,
		ocispec.AnnotationVersion: c.Version,
		ocispec.AnnotationSource:  "https://github.com/karpx/karpx",
	}).(v1.ImageIndex)
	if !ok {
		return nil, errors.New("annotating the index did not return an index")
	}
	d, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	built.Index, built.Digest = idx, d
	return built, nil
}

// Write builds c and writes, under out:
//
//   - NAME/, an OCI image layout whose index.json lists the image index
//     (annotated with the tag as org.opencontainers.image.ref.name and the
//     full reference as io.containerd.image.name) and the SBOM referrer
//     manifest (artifactType application/vnd.cyclonedx+json, subject the
//     index);
//   - NAME.tar, the same layout as a tar with fixed timestamps and owners;
//   - NAME.cdx.json, the SBOM (see Built.SBOM);
//   - NAME.intoto.json, the build provenance of NAME.tar, the index and its
//     images (see Built.Provenance).
//
// Existing outputs are replaced. The same inputs give byte-identical files.
func (c Component) Write(out string) (*Written, error) {
	built, err := c.Build()
	if err != nil {
		return nil, err
	}
	sbom, err := built.SBOMJSON()
	if err != nil {
		return nil, fmt.Errorf("image %s: SBOM: %w", c.Name, err)
	}
	w := &Written{
		Reference:  c.Reference(),
		Digest:     built.Digest,
		Layout:     filepath.Join(out, c.Name),
		Archive:    filepath.Join(out, c.Name+".tar"),
		SBOM:       filepath.Join(out, c.Name+".cdx.json"),
		Provenance: filepath.Join(out, c.Name+".intoto.json"),
	}
	if err := os.RemoveAll(w.Layout); err != nil {
		return nil, err
	}
	l, err := layout.Write(w.Layout, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := l.AppendIndex(built.Index, layout.WithAnnotations(map[string]string{
		ocispec.AnnotationRefName: c.Version,
		ContainerdImageName:       c.Reference(),
	})); err != nil {
		return nil, fmt.Errorf("image %s: writing the layout: %w", c.Name, err)
	}
	idxDesc, err := indexDescriptor(built)
	if err != nil {
		return nil, err
	}
	if w.SBOMDigest, err = appendReferrer(l, idxDesc, sbom); err != nil {
		return nil, fmt.Errorf("image %s: SBOM referrer: %w", c.Name, err)
	}
	if err := os.WriteFile(w.SBOM, sbom, 0o644); err != nil {
		return nil, err
	}
	if err := tarDir(w.Layout, w.Archive); err != nil {
		return nil, fmt.Errorf("image %s: %w", c.Name, err)
	}
	st, err := built.Provenance(w)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", c.Name, err)
	}
	prov, err := ProvenanceJSON(st)
	if err != nil {
		return nil, fmt.Errorf("image %s: provenance: %w", c.Name, err)
	}
	if err := os.WriteFile(w.Provenance, prov, 0o644); err != nil {
		return nil, err
	}
	return w, nil
}

// indexDescriptor returns the descriptor of b's index (media type, size,
// digest), the subject of its referrers.
func indexDescriptor(b *Built) (v1.Descriptor, error) {
	mt, err := b.Index.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	size, err := b.Index.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Size: size, Digest: b.Digest}, nil
}

// appendReferrer writes an OCI 1.1 artifact manifest to l: artifactType
// SBOMArtifactType, the empty config, one layer holding sbom, subject
// subject. It lists the manifest in index.json with its artifactType and no
// name, so importers that create named images skip it, and returns its
// digest.
func appendReferrer(l layout.Path, subject v1.Descriptor, sbom []byte) (v1.Hash, error) {
	blob := func(data []byte) (v1.Hash, error) {
		h, _, err := v1.SHA256(bytes.NewReader(data))
		if err != nil {
			return v1.Hash{}, err
		}
		return h, l.WriteBlob(h, io.NopCloser(bytes.NewReader(data)))
	}
	empty := ocispec.DescriptorEmptyJSON
	if _, err := blob(empty.Data); err != nil {
		return v1.Hash{}, err
	}
	layerDigest, err := blob(sbom)
	if err != nil {
		return v1.Hash{}, err
	}
	subj := ocispec.Descriptor{MediaType: string(subject.MediaType), Size: subject.Size, Digest: ocidigest(subject.Digest)}
	m := ocispec.Manifest{
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: SBOMArtifactType,
		Config:       ocispec.Descriptor{MediaType: empty.MediaType, Size: empty.Size, Digest: empty.Digest, Data: empty.Data},
		Layers: []ocispec.Descriptor{{
			MediaType:   SBOMArtifactType,
			Size:        int64(len(sbom)),
			Digest:      ocidigest(layerDigest),
			Annotations: map[string]string{ocispec.AnnotationTitle: "sbom.cdx.json"},
		}},
		Subject: &subj,
	}
	m.SchemaVersion = 2
	raw, err := json.Marshal(m)
	if err != nil {
		return v1.Hash{}, err
	}
	d, err := blob(raw)
	if err != nil {
		return v1.Hash{}, err
	}
	return d, l.AppendDescriptor(v1.Descriptor{
		MediaType:    types.OCIManifestSchema1,
		Size:         int64(len(raw)),
		Digest:       d,
		ArtifactType: SBOMArtifactType,
	})
}

// ocidigest converts a go-containerregistry hash to the image-spec's digest
// type (both "ALGORITHM:HEX").
func ocidigest(h v1.Hash) digest.Digest { return digest.Digest(h.String()) }

// tarDir writes the files under dir to file as a tar with paths relative to
// dir, in lexical order, owned by 0:0, with the Unix epoch as modification
// time: the same tree gives the same bytes.
func tarDir(dir, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, dir+string(filepath.Separator)))
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o755, ModTime: epoch})
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}
