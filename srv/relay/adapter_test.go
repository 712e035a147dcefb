package relay

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// adapted is the smallest external host: the Adapter alone.
type adapted struct{ Adapter }

func (h *adapted) Deliver(env Envelope) bool {
	h.Lifecycle(env, func() any { return map[string]string{"page": "cart"} })
	return true
}

// TestAdapterAnswersLifecycle: a host built on Adapter says what it is
// to the host it replaces, publishes its whole tool set each time, and
// answers session.start, session.end and snapshot.get as every host
// does, the snapshot carrying its uiSpec.
func TestAdapterAnswersLifecycle(t *testing.T) {
	logs, err := studylog.Open(t.TempDir(), studylog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := New(Options{Logs: logs})
	defer r.Close()
	var replies owned.Group
	defer replies.Close()
	old, _ := localHost(r, "tok", "s")
	drain(old)
	h := &adapted{}
	h.Join(r, "tok", "s", HostKindAGUI, &replies, h)
	defer h.Ext.Leave()
	if online, _, _ := r.Status("tok", "s"); !online {
		t.Fatal("the adapter is not the session's host")
	}
	var by struct {
		By string `json:"by"`
	}
	if m := <-old.replies; m.Type != wire.TypeReplaced || json.Unmarshal(m.Payload, &by) != nil || by.By != HostKindAGUI {
		t.Fatalf("the host it replaced was told %s %s, want relay.replaced by %q", m.Type, m.Payload, HostKindAGUI)
	}
	// Its frontend declares all its tools at once: the latest set
	// replaces the stages' tools the page before it had published.
	for _, tools := range []string{`[{"name":"a"},{"name":"b"}]`, `[{"name":"c"}]`} {
		if err := h.Ext.Send(Envelope{Type: wire.TypeStateUpdated, Payload: json.RawMessage(`{"toolSchema":` + tools + `}`)}); err != nil {
			t.Fatal(err)
		}
	}
	l := r.Local("tok", "s")
	if st := l.State(); len(st.Tools) != 1 || wire.ParseTool(st.Tools[0]).Name != "c" {
		t.Fatalf("tools after two sets: %s", st.Tools)
	}
	defer l.Close()
	for _, c := range []struct{ ask, want, payload string }{
		{wire.TypeSessionStart, wire.TypeSessionStarted, ""}, // the relay adds the study's id
		{wire.TypeSnapshotGet, wire.TypeSnapshotState, `{"page":"cart"}`},
		{wire.TypeSessionEnd, wire.TypeSessionEnded, ""},
	} {
		in := json.RawMessage(`{}`)
		if c.ask == wire.TypeSessionEnd {
			in = json.RawMessage(`{"reason":"done"}`)
		}
		rep, err := l.Request(context.Background(), c.ask, in)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			UISpec json.RawMessage `json:"uiSpec"`
		}
		_ = json.Unmarshal(rep.Payload, &p)
		if rep.Type != c.want || c.payload != "" && string(p.UISpec) != c.payload {
			t.Fatalf("%s answered %s %s, want %s with uiSpec %s", c.ask, rep.Type, rep.Payload, c.want, c.payload)
		}
	}
}
