// Command ociimage builds the agentassistant container image without a
// container engine: the linux binaries GoReleaser built into dist/ on an
// empty base (they are static), a non-root user, the data in a volume,
// the health check on /health. It writes an OCI image layout with both
// architectures, as a tar (an "oci-archive": docker load, podman load and
// skopeo read it). The Dockerfile builds the same image for those with
// Docker.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	uid     = 65532
	user    = "agentassistant"
	binDir  = "/usr/local/bin"
	dataDir = "/data"
	// imageName is what the image loads as: "docker run agentassistant".
	imageName = "agentassistant"
)

func main() {
	dist := flag.String("dist", "dist", "GoReleaser's output directory")
	out := flag.String("out", "dist/agentassistant-image.tar", "the OCI archive to write")
	flag.Parse()
	if err := run(*dist, *out); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func run(dist, out string) error {
	base, err := baseLayer()
	if err != nil {
		return err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range []struct{ goarch, dir string }{{"amd64", "linux_amd64_v1"}, {"arm64", "linux_arm64_v8.0"}} {
		img, err := image(dist, arch.goarch, arch.dir, base)
		if err != nil {
			return err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch.goarch}}})
	}
	// The layout holds one image, the index of both architectures, named
	// as docker buildx's OCI exporter names it: podman load and skopeo
	// refuse a layout of several images, and docker load and podman load
	// take the image's name from these annotations (else it is untagged).
	named := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{Add: idx,
		Descriptor: v1.Descriptor{Annotations: map[string]string{
			"io.containerd.image.name":          "docker.io/library/" + imageName + ":latest",
			"org.opencontainers.image.ref.name": "latest",
		}}})
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := layout.Write(tmp, named); err != nil {
		return fmt.Errorf("write OCI layout: %w", err)
	}
	return tarDir(tmp, out)
}

// image is the image of one architecture: the base layer, then the
// binaries, then the config.
func image(dist, goarch, dir string, base v1.Layer) (v1.Image, error) {
	var files []file
	for _, name := range []string{"agentassistant-srv", "agentassistant-mcp"} {
		p := filepath.Join(dist, name+"_"+dir, name)
		b, err := os.ReadFile(p) // #nosec G304 -- the build's own output
		if err != nil {
			return nil, fmt.Errorf("binary for linux/%s (run make dist first): %w", goarch, err)
		}
		files = append(files, file{name: binDir + "/" + name, mode: 0o755, body: b})
	}
	bins, err := layer(files)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, bins)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile() // the layers' diff IDs, kept
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = goarch, "linux"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config = v1.Config{
		User: fmt.Sprintf("%d:%d", uid, uid),
		// Beyond the container's loopback: a token is then required
		// (-token, or agentassistant_server_token in
		// /data/agentassistant-srv.toml, read from the working directory).
		Entrypoint:   []string{binDir + "/agentassistant-srv", "-host", "0.0.0.0", "-data", dataDir},
		WorkingDir:   dataDir,
		Env:          []string{"HOME=" + dataDir, "PATH=" + binDir + ":/usr/bin:/bin"},
		Volumes:      map[string]struct{}{dataDir: {}},
		ExposedPorts: map[string]struct{}{"22080/tcp": {}},
		Healthcheck: &v1.HealthConfig{
			Test:        []string{"CMD", binDir + "/agentassistant-srv", "health"},
			Interval:    30 * time.Second,
			Timeout:     5 * time.Second,
			StartPeriod: 10 * time.Second,
			Retries:     3,
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":  "agentassistant",
			"org.opencontainers.image.source": "https://github.com/agentassistant/agentassistant",
		},
	}
	return mutate.ConfigFile(img, cf)
}

// baseLayer is what an empty base lacks: the user, its data directory,
// /tmp, and the CA certificates the channels (push, Telegram, webhooks)
// verify their servers with.
func baseLayer() (v1.Layer, error) {
	files := []file{
		{name: "/etc/passwd", mode: 0o644, body: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", user, uid, uid, user, dataDir)},
		{name: "/etc/group", mode: 0o644, body: fmt.Appendf(nil, "root:x:0:\n%s:x:%d:\n", user, uid)},
		{name: dataDir + "/", mode: 0o700, uid: uid},
		{name: "/tmp/", mode: 0o1777},
	}
	ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	switch {
	case err == nil:
		files = append(files, file{name: "/etc/ssl/certs/ca-certificates.crt", mode: 0o644, body: ca})
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	default:
		fmt.Fprintln(os.Stderr, "ociimage: no /etc/ssl/certs/ca-certificates.crt here: the image verifies no TLS server (Debian: apt-get install ca-certificates)")
	}
	return layer(files)
}

type file struct {
	name string // a trailing / makes a directory
	mode int64
	uid  int
	body []byte
}

// layer is a tar layer of files, with fixed times so the same inputs
// give the same digest.
func layer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name[1:], Mode: f.mode, Uid: f.uid, Gid: f.uid, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Size: int64(len(f.body))}
		if f.name[len(f.name)-1] == '/' {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// tarDir writes the directory dir as the tar out.
func tarDir(dir, out string) error {
	f, err := os.Create(out) // #nosec G304 -- where the caller asked
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name, h.ModTime = filepath.ToSlash(rel), time.Unix(0, 0)
		if err := tw.WriteHeader(h); err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p) // #nosec G304 -- our own layout
		if err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
