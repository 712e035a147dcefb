package channel_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/channel"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestClusterFollowUpFromNoteReplacesTheNotification: the follow-up
// that ntfy's lease holder makes from the cluster's notes (the instance
// where the question was answered never made it) is published under the
// question's sequence ID, so that it replaces the question's
// notification, buttons and all, rather than coming as another one.
func TestClusterFollowUpFromNoteReplacesTheNotification(t *testing.T) {
	seqs := make(chan [2]string, 4) // sequence ID, and "asked" or "settled"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			SequenceID string            `json:"sequence_id"`
			Actions    []json.RawMessage `json:"actions"`
		}
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		kind := "settled"
		if len(m.Actions) > 0 {
			kind = "asked"
		}
		seqs <- [2]string{m.SequenceID, kind}
		_, _ = w.Write([]byte(`{"id":"x"}`))
	}))
	t.Cleanup(srv.Close)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	o := channel.Options{Hub: a.hub, Caps: a.caps, Routes: map[string][]channel.Channel{tokA: {&channel.Ntfy{URL: srv.URL, Topic: "t"}}},
		Notes: a.ch, Leader: a.ch, PublicURL: "https://aa.example"}
	channel.SetOwedScan(&o, 50*time.Millisecond)
	m := channel.New(o)
	t.Cleanup(m.Close)

	answered := askOn(a.hub, "q-1")
	asked := recv(t, "the question published", seqs)
	if asked[1] != "asked" || asked[0] == "" {
		t.Fatalf("the question was published as %v", asked)
	}
	waitUntil(t, "B has the question", func() bool { return b.hub.Validity(tokA, []string{"q-1"})["q-1"] })
	// Answered through B, which has no channels: A's lease finds it owed.
	if err := b.hub.Answer(t.Context(), tokA, wire.AskQuestion, "q-1", hub.Reply{Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Yes"}}},
		ClientID: "ws:Ana", Nickname: "Ana"}); err != nil {
		t.Fatal(err)
	}
	recv(t, "the agent's answer", answered)
	settled := recv(t, "the notification replaced", seqs)
	if settled[1] != "settled" || settled[0] != asked[0] {
		t.Errorf("the follow-up was published as %v; the question under sequence ID %q", settled, asked[0])
	}
}
