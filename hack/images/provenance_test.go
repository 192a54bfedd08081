package main

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// TestProvenanceBesideTheArchive writes the tiny component and reads
// NAME.intoto.json back with the in-toto attestation library: a valid
// Statement v1 with a valid SLSA Provenance v1 predicate, whose subjects
// carry the SHA-256 of NAME.tar as written, the index digest and every
// platform image digest the layout lists, whose resolved dependencies are
// the binaries and the license (their SHA-256s), and whose byproduct is the
// SBOM file. The same inputs write the same bytes.
func TestProvenanceBesideTheArchive(t *testing.T) {
	c := tinyComponent(t, "v1.2.3")
	out := t.TempDir()
	w, err := c.Write(out)
	if err != nil {
		t.Fatal(err)
	}
	if w.Provenance != filepath.Join(out, "karpx-controller.intoto.json") {
		t.Errorf("provenance written to %s, want beside %s", w.Provenance, w.Archive)
	}
	raw, err := os.ReadFile(w.Provenance)
	if err != nil {
		t.Fatal(err)
	}
	var st intoto.Statement
	if err := protojson.Unmarshal(raw, &st); err != nil {
		t.Fatalf("%s is not an in-toto Statement: %v", w.Provenance, err)
	}
	if err := st.Validate(); err != nil {
		t.Fatalf("statement: %v", err)
	}
	if st.GetType() != intoto.StatementTypeUri || st.GetPredicateType() != "https://slsa.dev/provenance/v1" {
		t.Errorf("_type %q predicateType %q, want %s and https://slsa.dev/provenance/v1", st.GetType(), st.GetPredicateType(), intoto.StatementTypeUri)
	}
	predJSON, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		t.Fatal(err)
	}
	var prov slsa.Provenance
	if err := protojson.Unmarshal(predJSON, &prov); err != nil {
		t.Fatalf("predicate is not SLSA Provenance v1: %v", err)
	}
	if err := prov.Validate(); err != nil {
		t.Fatalf("predicate: %v", err)
	}

	// Subjects: what was written, digest for digest.
	want := map[string]string{"karpx-controller.tar": fileSHA256(t, w.Archive), c.Reference(): w.Digest.Hex}
	idx, err := layout.ImageIndexFromPath(w.Layout)
	if err != nil {
		t.Fatal(err)
	}
	top, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	inner, err := idx.ImageIndex(w.Digest)
	if err != nil {
		t.Fatalf("layout %s (%d manifests): no index %s: %v", w.Layout, len(top.Manifests), w.Digest, err)
	}
	im, err := inner.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range im.Manifests {
		want[c.Reference()+" "+m.Platform.String()] = m.Digest.Hex
	}
	got := map[string]string{}
	for _, s := range st.GetSubject() {
		got[s.GetName()] = s.GetDigest()["sha256"]
	}
	if !maps.Equal(got, want) {
		t.Errorf("subjects %v, want %v", got, want)
	}

	// Resolved dependencies: the binaries and the license.
	wantDeps := map[string]string{"LICENSE": hex.EncodeToString(sha(c.License))}
	for _, b := range c.Binaries {
		wantDeps[b.Platform.OS+"_"+b.Platform.Architecture+"/karpx-controller"] = fileSHA256(t, b.Path)
	}
	gotDeps := map[string]string{}
	for _, d := range prov.GetBuildDefinition().GetResolvedDependencies() {
		gotDeps[d.GetName()] = d.GetDigest()["sha256"]
	}
	if !maps.Equal(gotDeps, wantDeps) {
		t.Errorf("resolved dependencies %v, want %v", gotDeps, wantDeps)
	}
	ext := prov.GetBuildDefinition().GetExternalParameters().AsMap()
	if ext["version"] != "v1.2.3" || ext["component"] != "karpx-controller" || !slices.Equal(anyStrings(ext["platforms"]), wantPlatforms) {
		t.Errorf("external parameters %v", ext)
	}
	if prov.GetBuildDefinition().GetBuildType() != ProvenanceBuildType || prov.GetRunDetails().GetBuilder().GetId() != ProvenanceBuilderID {
		t.Errorf("buildType %q builder %q", prov.GetBuildDefinition().GetBuildType(), prov.GetRunDetails().GetBuilder().GetId())
	}
	bp := prov.GetRunDetails().GetByproducts()
	if len(bp) != 1 || bp[0].GetName() != "karpx-controller.cdx.json" || bp[0].GetDigest()["sha256"] != fileSHA256(t, w.SBOM) {
		t.Errorf("byproducts %v, want the SBOM %s", bp, w.SBOM)
	}

	again, err := c.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if raw2, _ := os.ReadFile(again.Provenance); string(raw2) != string(raw) {
		t.Errorf("provenance not reproducible:\n%s\n---\n%s", raw, raw2)
	}
}

func sha(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(sha(data))
}

func anyStrings(v any) []string {
	var out []string
	s, _ := v.([]any)
	for _, x := range s {
		str, _ := x.(string)
		out = append(out, str)
	}
	return out
}
