package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoServerInside: the client binaries talk to the server over Connect
// and /ws; they must not carry the server's storage or its machinery. The
// only server package they may use is auth, for the token file the server
// keeps on the same machine.
func TestNoServerInside(t *testing.T) {
	const srv = "github.com/agentassistant/agentassistant/srv"
	for _, bin := range []string{".", "../agentassistant-input"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", bin).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", bin, err)
		}
		for _, p := range strings.Fields(string(out)) {
			switch {
			case strings.HasPrefix(p, "go.etcd.io/bbolt"),
				strings.HasPrefix(p, srv+"/") && p != srv+"/auth",
				p == srv:
				t.Errorf("%s depends on %s", bin, p)
			}
		}
	}
}
