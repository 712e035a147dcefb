package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestVersionFlag: both binaries say which build they are and exit, without
// starting anything.
func TestVersionFlag(t *testing.T) {
	for _, name := range []string{"agentassistant-srv", "agentassistant-mcp"} {
		cmd := exec.Command(filepath.Join(binDir, name), "-version")
		cmd.Dir = t.TempDir()
		cmd.Env = []string{"HOME=" + cmd.Dir, "XDG_CONFIG_HOME=" + cmd.Dir}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s -version: %v\n%s", name, err, out)
			continue
		}
		if !regexp.MustCompile(`^` + name + ` \S+( .*)?\n$`).Match(out) {
			t.Errorf("%s -version printed %q", name, out)
		}
	}
}
