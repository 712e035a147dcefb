package relay

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestToolsPastTheBoundAreSaid: a host that declares more tools than the
// relay lists for agents keeps its state, and is told, naming the bound,
// how many of its tools agents do not get listed; a host within it hears
// nothing.
func TestToolsPastTheBoundAreSaid(t *testing.T) {
	r := New(Options{})
	defer r.Close()
	host, ch := localHost(r, "tok", "s")
	drain(host) // it declared select: 255 places are left

	schema := make([]map[string]string, 10000)
	for i := range schema {
		schema[i] = map[string]string{"name": fmt.Sprintf("t%d", i)}
	}
	b, _ := json.Marshal(map[string]any{"uiSpec": map[string]string{"stage": "many"}, "toolSchema": schema})
	if e := ch.fromHost(host, Envelope{V: wire.Version, Type: wire.TypeStateUpdated, ID: "st", Payload: b}); e != nil {
		t.Fatalf("the state was refused: %v", e)
	}
	var said []Envelope
	for len(host.replies) > 0 {
		if env := (<-host.replies).Envelope; env.Type == wire.TypeError {
			said = append(said, env)
		}
	}
	if len(said) != 1 || said[0].ReplyTo != "st" || !strings.Contains(string(said[0].Payload), "9745 of its 10000 tools") ||
		!strings.Contains(string(said[0].Payload), fmt.Sprint(maxTools)) {
		t.Fatalf("the host was told %d errors (%q), want one to st naming the 9745 tools not listed (its select is) and the bound", len(said), fmt.Sprint(said))
	}
	ch.mu.Lock()
	s := ch.stateLocked()
	ch.mu.Unlock()
	if len(s.Tools) != maxTools || string(s.UISpec) != `{"stage":"many"}` {
		t.Fatalf("kept %d tools and uiSpec %s, want %d and the new state", len(s.Tools), s.UISpec, maxTools)
	}

	ch.fromHost(host, Envelope{V: wire.Version, Type: wire.TypeStateUpdated, ID: "again", Payload: json.RawMessage(`{"toolSchema":[{"name":"t1"}]}`)})
	for len(host.replies) > 0 {
		if env := (<-host.replies).Envelope; env.Type == wire.TypeError {
			t.Fatalf("a tool already listed was refused: %s", env.Payload)
		}
	}
}
