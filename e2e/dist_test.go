package e2e

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// TestDistArchive runs the binaries of a release archive (AA_DIST, the
// directory it was extracted to; .ci/run sets it): each says the version
// it was stamped with (AA_DIST_VERSION) and the commit, the server serves
// the embedded web UI, and a question asked through the archive's
// agentassistant-mcp is answered over /ws.
func TestDistArchive(t *testing.T) {
	if os.Getenv("AA_DIST") == "" {
		t.Skip("AA_DIST names no extracted release archive (make dist; .ci/run does)")
	}
	want := os.Getenv("AA_DIST_VERSION")
	for _, name := range []string{"agentassistant-srv", "agentassistant-mcp"} {
		out, err := exec.Command(filepath.Join(binDir, name), "-version").Output()
		if err != nil {
			t.Fatalf("%s -version: %v", name, err)
		}
		line := strings.TrimSpace(string(out))
		if !regexp.MustCompile(`^`+name+` \S+ [0-9a-f]{12} \d{4}-\d\d-\d\dT\S+ go1\.`).MatchString(line) ||
			(want != "" && strings.Fields(line)[1] != want) {
			t.Errorf("%s -version = %q, want version %q, commit and date stamped", name, line, want)
		}
	}

	s := startServer(t, tokenA)
	resp, err := http.Get(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "<script") {
		t.Errorf("GET / = %d without the embedded UI:\n%.300s", resp.StatusCode, page)
	}

	ui := dial(t, s, tokenA, "pc")
	agent := startMCP(t, s, tokenA)
	done := askAsync(agent, "Ship it?")
	m := must[*pb.WebsocketMessage](t)(ui.Expect("AskQuestion", 10*time.Second))
	if err := ui.Send(wstest.TextReply(m.GetAskQuestionRequest().GetID(), "Ship it.")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.r.IsError || resultText(r.r) != "Ship it." {
			t.Fatalf("result = %+v %v", r.r, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the answer never reached the agent")
	}
}

// ociBlob reads the blob of digest from the OCI layout files.
func ociBlob(t *testing.T, files map[string][]byte, digest string) []byte {
	t.Helper()
	b, ok := files["blobs/"+strings.Replace(digest, ":", "/", 1)]
	if !ok {
		t.Fatalf("the image has no blob %s", digest)
	}
	return b
}

// TestContainerImage unpacks the image make image wrote (AA_IMAGE, an OCI
// archive) without a container engine: both architectures are there;
// the config runs the server as a non-root user that /etc/passwd knows,
// with /data a volume and the health check on /health; this machine's
// binary from its layers runs.
func TestContainerImage(t *testing.T) {
	archive := os.Getenv("AA_IMAGE")
	if archive == "" {
		t.Skip("AA_IMAGE names no image archive (make dist image; .ci/run does)")
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			files[h.Name] = must[[]byte](t)(io.ReadAll(tr))
		}
	}
	type descriptor struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Platform  *struct {
			OS           string `json:"os"`
			Architecture string `json:"architecture"`
		} `json:"platform"`
		Annotations map[string]string `json:"annotations"`
	}
	var index struct{ Manifests []descriptor }
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	// podman load and skopeo's oci-archive: take the layout's one image
	// and refuse more ("more than one image in oci, choose an image");
	// docker load and podman load name it from its annotations, without
	// which it loads untagged and "docker run agentassistant", as
	// docs/install.md says, finds no image.
	if len(index.Manifests) != 1 || index.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("index.json holds %d manifests (the first a %s), want one: the image index of both architectures", len(index.Manifests), index.Manifests[0].MediaType)
	}
	if a := index.Manifests[0].Annotations; a["io.containerd.image.name"] != "docker.io/library/agentassistant:latest" || a["org.opencontainers.image.ref.name"] != "latest" {
		t.Errorf("the image is named %v, want agentassistant:latest", a)
	}
	if err := json.Unmarshal(ociBlob(t, files, index.Manifests[0].Digest), &index); err != nil {
		t.Fatal(err)
	}
	var archs []string
	var mine *descriptor
	for i, m := range index.Manifests {
		if m.Platform != nil && m.Platform.OS == "linux" {
			archs = append(archs, m.Platform.Architecture)
			if m.Platform.Architecture == runtime.GOARCH {
				mine = &index.Manifests[i]
			}
		}
	}
	slices.Sort(archs)
	if !slices.Equal(archs, []string{"amd64", "arm64"}) || mine == nil {
		t.Fatalf("the image is for %v, want linux amd64 and arm64", archs)
	}
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(ociBlob(t, files, mine.Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Config struct {
			User        string
			Entrypoint  []string
			WorkingDir  string
			Volumes     map[string]struct{}
			Healthcheck struct{ Test []string }
		} `json:"config"`
	}
	if err := json.Unmarshal(ociBlob(t, files, manifest.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User == "" || c.User == "0" || strings.HasPrefix(c.User, "0:") || c.User == "root" {
		t.Errorf("the image runs as %q, want a user that is not root", c.User)
	}
	if len(c.Entrypoint) == 0 || c.Entrypoint[0] != "/usr/local/bin/agentassistant-srv" || !slices.Contains(c.Entrypoint, "/data") {
		t.Errorf("entrypoint = %q", c.Entrypoint)
	}
	if _, ok := c.Volumes["/data"]; !ok {
		t.Errorf("volumes = %v, want /data", c.Volumes)
	}
	if !slices.Equal(c.Healthcheck.Test, []string{"CMD", "/usr/local/bin/agentassistant-srv", "health"}) {
		t.Errorf("health check = %q", c.Healthcheck.Test)
	}

	root := t.TempDir()
	for _, l := range manifest.Layers {
		zr, err := gzip.NewReader(strings.NewReader(string(ociBlob(t, files, l.Digest))))
		if err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
		lr := tar.NewReader(zr)
		for {
			h, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(root, filepath.FromSlash(path.Clean("/"+h.Name)))
			switch h.Typeflag {
			case tar.TypeDir:
				err = os.MkdirAll(p, 0o755)
			case tar.TypeReg:
				if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
					err = os.WriteFile(p, must[[]byte](t)(io.ReadAll(lr)), os.FileMode(h.Mode)&0o755)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	uid := strings.Split(c.User, ":")[0]
	passwd := string(must[[]byte](t)(os.ReadFile(filepath.Join(root, "etc", "passwd"))))
	if !regexp.MustCompile(`(?m)^[a-z]+:x:` + regexp.QuoteMeta(uid) + `:`).MatchString(passwd) {
		t.Errorf("/etc/passwd has no user %s:\n%s", uid, passwd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(root, "usr", "local", "bin", "agentassistant-srv"), "-version").Output()
	if err != nil || !strings.HasPrefix(string(out), "agentassistant-srv ") || strings.Contains(string(out), " dev ") {
		t.Errorf("the image's binary -version: %v %q", err, out)
	}
}
