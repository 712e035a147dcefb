package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStampedByLinker: what a release build passes with -ldflags -X is what
// -version prints, even from a build that recorded no VCS information.
func TestStampedByLinker(t *testing.T) {
	// The probe is built inside this module, so it can import an
	// internal package.
	probeDir, err := os.MkdirTemp(".", "probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(probeDir) })
	if err := os.WriteFile(filepath.Join(probeDir, "main.go"), []byte(`package main

import (
	"fmt"

	"github.com/agentassistant/agentassistant/internal/buildinfo"
)

func main() { fmt.Println(buildinfo.String("probe")) }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	const pkg = "github.com/agentassistant/agentassistant/internal/buildinfo"
	bin := filepath.Join(t.TempDir(), "probe")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin,
		"-ldflags", "-X "+pkg+".version=v1.2.3 -X "+pkg+".commit=0123456789abcdef0123 -X "+pkg+".date=2026-01-02T03:04:05Z",
		"./"+probeDir)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(string(out))
	if want := "probe v1.2.3 0123456789ab 2026-01-02T03:04:05Z go"; !strings.HasPrefix(got, want) {
		t.Errorf("version line = %q, want it to start with %q", got, want)
	}
}
