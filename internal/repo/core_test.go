package repo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCoreKnowsNoWire: the hub tells a room's clients typed notes and
// each door encodes its own frames, so no file of the hub (but its tests)
// builds a /ws frame: none names WebsocketMessage.
func TestCoreKnowsNoWire(t *testing.T) {
	files, err := filepath.Glob("../../srv/hub/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no hub files: %v", err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "WebsocketMessage") {
			t.Errorf("srv/hub/%s builds /ws frames (names WebsocketMessage); the /ws door (srv/inbox) encodes them", filepath.Base(f))
		}
	}
}
