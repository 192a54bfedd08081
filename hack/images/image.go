package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultRepository is the registry path the manifests' images are pulled
// from (manifests/controller and manifests/webhook, through kustomize's
// images:).
const DefaultRepository = "ghcr.io/karpx"

// NonRootUID and NonRootGID are the user and group the images run as: 65532,
// the "nonroot" user of the distroless images, which kubelet accepts for
// runAsNonRoot because it is numeric and not 0.
const (
	NonRootUID = 65532
	NonRootGID = 65532
)

// epoch is the time recorded everywhere an image has a timestamp (layer
// entries, config, history), so that the same inputs give the same digests.
var epoch = time.Unix(0, 0).UTC()

// Spec describes one component image for one platform.
type Spec struct {
	// Name is the component and the binary's name, e.g. "karpx-controller";
	// the binary is installed as /NAME and is the entrypoint.
	Name string
	// Version is the image tag and the org.opencontainers.image.version
	// label, e.g. "v0.1.0".
	Version string
	// Platform is the OS and architecture the binary was built for
	// (GOOS/GOARCH), recorded in the image config and in the index.
	Platform v1.Platform
	// BinaryPath is the static (CGO_ENABLED=0) binary to install.
	BinaryPath string
	// License is copied to /LICENSE.
	License []byte
}

// Image returns the image: OCI media types, a single gzip layer, Entrypoint
// ["/NAME"], User "65532:65532", OS and Architecture from Platform, and the
// Unix epoch as every timestamp, so that the same binary gives the same
// image digest. It returns the error from reading the binary.
func (s Spec) Image() (v1.Image, error) {
	bin, err := os.ReadFile(s.BinaryPath)
	if err != nil {
		return nil, err
	}
	layer, err := s.layer(bin)
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		History:   v1.History{CreatedBy: "karpx hack/images: /" + s.Name + ", /etc/passwd, /etc/group, /LICENSE", Created: v1.Time{Time: epoch}},
		MediaType: types.OCILayer,
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = s.Platform.OS, s.Platform.Architecture, s.Platform.Variant
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = []string{"/" + s.Name}
	cfg.Config.User = fmt.Sprintf("%d:%d", NonRootUID, NonRootGID)
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    s.Name,
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.source":   "https://github.com/karpx/karpx",
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	return mutate.ConfigFile(img, cfg)
}

// layer returns the gzip-compressed layer: /etc (with passwd and group
// naming the nonroot user, so tools that resolve the user find it), /LICENSE
// and /NAME (mode 0755, owned by root so the running user cannot replace
// it). Nothing in it is writable by the nonroot user: the binaries write no
// file, so the image runs with a read-only root filesystem. It compresses
// once, in memory, instead of once for the digest and again for each write.
func (s Spec) layer(bin []byte) (v1.Layer, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf) // no name, zero ModTime: deterministic header
	tw := tar.NewWriter(zw)
	dir := func(p string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX})
	}
	file := func(p string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRootUID, NonRootGID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootGID)
	for _, step := range []func() error{
		func() error { return dir("etc") },
		func() error { return file("etc/passwd", 0o644, []byte(passwd)) },
		func() error { return file("etc/group", 0o644, []byte(group)) },
		func() error { return file("LICENSE", 0o644, s.License) },
		func() error { return file(path.Clean(s.Name), 0o755, bin) },
		tw.Close,
		zw.Close,
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	compressed := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
