package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// Provenance identifiers (SLSA v1.0, slsa.dev/spec/v1.0/provenance): the
// in-toto predicate type, and karpx's own build type and builder id, which
// name this command (a build type is a URI its producer defines).
const (
	// ProvenancePredicateType is SLSA Provenance v1's predicate type.
	ProvenancePredicateType = "https://slsa.dev/provenance/v1"
	// ProvenanceBuildType is the buildType of the images this command
	// writes: external parameters component, version, repository and
	// platforms; resolved dependencies the binaries and the license.
	ProvenanceBuildType = "https://github.com/karpx/karpx/hack/images/buildtypes/v1"
	// ProvenanceBuilderID is the builder: this command.
	ProvenanceBuilderID = "https://github.com/karpx/karpx/hack/images"
)

// Provenance returns the in-toto Statement v1 (predicate SLSA Provenance
// v1) of the written component: its subjects are the tarball archive (name
// NAME.tar, the SHA-256 of the file), the image index and each platform
// image (named by reference and platform, their manifest digests); the
// predicate's external parameters are the Component's, its resolved
// dependencies each binary (OS_ARCH/NAME, SHA-256, Go version) and the
// license, its byproduct the SBOM file. Nothing time- or host-dependent is
// recorded. The statement is unsigned: a release signs it (e.g. cosign
// attest) where keys live. It returns the error reading a file or of the
// library's validation.
func (b *Built) Provenance(w *Written) (*intoto.Statement, error) {
	c := b.Component
	fileDigest := func(path string) (map[string]string, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		return map[string]string{"sha256": hex.EncodeToString(sum[:])}, nil
	}
	tarDigest, err := fileDigest(w.Archive)
	if err != nil {
		return nil, err
	}
	subjects := []*intoto.ResourceDescriptor{
		{Name: filepath.Base(w.Archive), Digest: tarDigest, MediaType: "application/x-tar"},
		{Name: c.Reference(), Uri: ociPURL(c, b.Digest, nil), Digest: map[string]string{"sha256": b.Digest.Hex}},
	}
	var deps []*intoto.ResourceDescriptor
	for _, img := range b.Images {
		p := img.Platform
		subjects = append(subjects, &intoto.ResourceDescriptor{Name: c.Reference() + " " + p.String(), Uri: ociPURL(c, img.Digest, &p), Digest: map[string]string{"sha256": img.Digest.Hex}})
		d, err := fileDigest(img.Path)
		if err != nil {
			return nil, err
		}
		dep := &intoto.ResourceDescriptor{Name: p.OS + "_" + p.Architecture + "/" + c.Name, Digest: d}
		if info, err := buildinfo.ReadFile(img.Path); err == nil {
			if dep.Annotations, err = structpb.NewStruct(map[string]any{"goVersion": info.GoVersion, "mainPackage": info.Path}); err != nil {
				return nil, err
			}
		}
		deps = append(deps, dep)
	}
	licenseSum := sha256.Sum256(c.License)
	deps = append(deps, &intoto.ResourceDescriptor{Name: "LICENSE", Digest: map[string]string{"sha256": hex.EncodeToString(licenseSum[:])}})
	sbomDigest, err := fileDigest(w.SBOM)
	if err != nil {
		return nil, err
	}
	platforms := []any{}
	for _, img := range b.Images {
		platforms = append(platforms, img.Platform.String())
	}
	ext, err := structpb.NewStruct(map[string]any{"component": c.Name, "version": c.Version, "repository": c.Repository, "platforms": platforms})
	if err != nil {
		return nil, err
	}
	pred := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{BuildType: ProvenanceBuildType, ExternalParameters: ext, ResolvedDependencies: deps},
		RunDetails: &slsa.RunDetails{
			Builder:    &slsa.Builder{Id: ProvenanceBuilderID, Version: map[string]string{"go": runtime.Version()}},
			Byproducts: []*intoto.ResourceDescriptor{{Name: filepath.Base(w.SBOM), MediaType: SBOMArtifactType, Digest: sbomDigest}},
		},
	}
	if err := pred.Validate(); err != nil {
		return nil, fmt.Errorf("provenance predicate: %w", err)
	}
	predStruct, err := toStruct(pred)
	if err != nil {
		return nil, err
	}
	st := &intoto.Statement{Type: intoto.StatementTypeUri, Subject: subjects, PredicateType: ProvenancePredicateType, Predicate: predStruct}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("provenance statement: %w", err)
	}
	return st, nil
}

// toStruct converts a proto message to the structpb.Struct a Statement's
// predicate holds, through its protojson form.
func toStruct(m *slsa.Provenance) (*structpb.Struct, error) {
	raw, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	return s, protojson.Unmarshal(raw, s)
}

// ProvenanceJSON returns st as indented JSON. protojson varies its
// whitespace from run to run on purpose; compacting and indenting with
// encoding/json makes the bytes reproducible (protojson already orders
// fields by number and map keys by value).
func ProvenanceJSON(st *intoto.Statement) ([]byte, error) {
	raw, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, err
	}
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
