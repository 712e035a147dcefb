package repo

import (
	"strings"
	"testing"
)

// TestCoreKnowsNoWire: the hub tells a room's clients typed notes and
// each door encodes its own frames, so no file of the hub (but its tests)
// builds a /ws frame: none names WebsocketMessage.
func TestCoreKnowsNoWire(t *testing.T) {
	for name, code := range sources(t, "srv/hub") {
		if strings.Contains(code, "WebsocketMessage") {
			t.Errorf("srv/hub/%s builds /ws frames (names WebsocketMessage); the /ws door (srv/inbox) encodes them", name)
		}
	}
}
