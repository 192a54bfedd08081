// Command images writes the release container images of karpx's in-cluster
// components (karpx-controller, karpx-webhook) without a registry or a
// container runtime. Each component is one multi-platform OCI image index
// (linux/amd64 and linux/arm64 from `make images`); each platform image is
// one layer on an empty base holding the static binary, /etc/passwd and
// /etc/group naming the non-root user 65532, and the LICENSE. The images run
// as 65532:65532 with a read-only root filesystem: nothing in them is
// writable by that user and the binaries write no file (the webhook reads
// its certificate from the mounted Secret at --cert-dir, /certs; logs go to
// stderr).
//
//	go run ./hack/images -version v0.1.0 -out _output/images \
//	    -bin-dir _output/images/bin -platforms linux/amd64,linux/arm64 \
//	    -components karpx-controller,karpx-webhook
//
// reads BIN-DIR/OS_ARCH/NAME and writes, per component NAME:
//
//   - _output/images/NAME/: an OCI image layout. index.json lists the image
//     index, tagged REPOSITORY/NAME:VERSION (-repository, default
//     ghcr.io/karpx) through the annotations org.opencontainers.image.ref.name
//     (VERSION) and io.containerd.image.name (the full reference), and the
//     SBOM as an OCI 1.1 referrer (artifactType application/vnd.cyclonedx+json,
//     subject the index).
//   - _output/images/NAME.tar: the same layout as a tar (an "oci-archive").
//   - _output/images/NAME.cdx.json: the SBOM, CycloneDX 1.6 JSON: the index
//     digest, each platform image's digest, each binary's SHA-256, Go version
//     and build settings, the standard library (pkg:golang/stdlib@vX.Y.Z,
//     what scanners match Go's advisories on), and every Go module compiled
//     into it with its version, its go.sum hash as property karpx:go:sum
//     (a dirhash, never labelled SHA-256) and the SHA-256 of its module zip
//     in the module cache (-modcache), read from the binary's build info.
//   - _output/images/NAME.intoto.json: the build provenance, an in-toto
//     Statement v1 with an SLSA Provenance v1 predicate
//     (github.com/in-toto/attestation): subjects NAME.tar, the index and each
//     platform image with their SHA-256 digests; resolved dependencies the
//     binaries and the license. It is unsigned: a release signs it where its
//     keys live.
//
// Digests are reproducible: every timestamp is the Unix epoch, owners are
// root, and the SBOM and provenance carry no time detail (the module zip
// hashes need the same module cache contents).
//
// Loading and pushing, all offline from these files:
//
//	ctr -n k8s.io images import --all-platforms _output/images/karpx-controller.tar
//	kind load image-archive _output/images/karpx-controller.tar
//	docker load -i _output/images/karpx-controller.tar   # Docker 25 or later
//	podman load -i _output/images/karpx-controller.tar
//	skopeo copy --all oci-archive:_output/images/karpx-controller.tar:v0.1.0 \
//	    docker://REGISTRY/karpx-controller:v0.1.0
//	oras cp -r --from-oci-layout _output/images/karpx-controller:v0.1.0 \
//	    REGISTRY/karpx-controller:v0.1.0   # the index and its SBOM referrer
//
// crane reads an OCI layout only when index.json holds one entry; with the
// SBOM referrer beside the index it needs `crane push --index`, which would
// push index.json itself, so push with skopeo or oras instead and inspect
// with `crane manifest` afterwards.
//
// The tag is the release version and never "latest": -version is required
// and "latest" is refused. `make images` builds the binaries
// (CGO_ENABLED=0, -trimpath, for each of IMAGE_PLATFORMS) and runs this.
package main
