package channel

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestSlackAnswerNotSavedTriedAgain: a thread reply and a press whose
// answer the server cannot save for a moment (a cluster's NATS without
// a quorum, a full disk) are taken once it can, not told "Not taken":
// the channel tries the answer again itself, and the press's
// capability, not used by an answer that was not saved, still answers.
// The press, acknowledged before it is saved, is told only that.
func TestSlackAnswerNotSavedTriedAgain(t *testing.T) {
	const botToken, appToken = "xoxb-3-secret-bot-token", "xapp-3-A1-secret-app-token"
	const dm = "D42"
	api := slacktest.Start(t, botToken, appToken)
	shared := newMemShared(t, tokA)
	h := hub.New(hub.Options{Shared: shared})
	shared.hub.Store(h)
	t.Cleanup(h.Close)
	caps := answercap.New()
	t.Cleanup(caps.Follow(h, store.Room))
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	m := New(Options{Hub: h, Caps: caps, Routes: map[string][]Channel{tokA: {sl}}})
	t.Cleanup(m.Close)
	ask := func(id string) chan *hub.Reply {
		out := make(chan *hub.Reply, 1)
		go func() {
			rep, _ := h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: id, Text: "Deploy?", Timeout: time.Hour})
			out <- rep
		}()
		return out
	}
	unsaved := func(typ string, payload map[string]any) {
		t.Helper()
		shared.fail.Store(true)
		before := shared.refused.Load()
		// A reply is acknowledged once saved, a press after ackWithin.
		acked := make(chan error, 1)
		go func() { acked <- api.Send(t.Context(), typ, payload) }()
		eventually(t, "the answer refused by the store", func() bool { return shared.refused.Load() > before })
		shared.fail.Store(false)
		if err := within(t, "the acknowledgement", acked); err != nil {
			t.Fatal(err)
		}
	}

	answered := ask("q-1")
	ts := api.Call(t, "chat.postMessage", 1)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts}); return ok })
	unsaved("events_api", slacktest.ThreadReply("U42", dm, ts, "Ship it."))
	if rep := answer(t, answered); rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}

	answered = ask("q-2")
	ts = api.Call(t, "chat.postMessage", 2)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts}); return ok })
	unsaved("interactive", slacktest.Press("U42", dm, ts, "a:0"))
	answer(t, answered)

	for _, c := range calls(t, api, "chat.postMessage") {
		if strings.Contains(c["text"], "Not taken") {
			t.Errorf("the person was told %q", c["text"])
		}
	}
	for _, c := range calls(t, api, "chat.postEphemeral") {
		if c["text"] != slackUnsavedNote {
			t.Errorf("the person was told %q", c["text"])
		}
	}
}

// TestSlackAcknowledgesOnceSaved: a thread reply's envelope is
// acknowledged once its answer is saved, not before: a server that dies
// between taking the reply and saving it has not acknowledged it, and
// Slack sends it again (after the restart, or to another instance)
// instead of the reply being lost.
func TestSlackAcknowledgesOnceSaved(t *testing.T) {
	const botToken, appToken = "xoxb-4-secret-bot-token", "xapp-4-A1-secret-app-token"
	const dm = "D42"
	api := slacktest.Start(t, botToken, appToken)
	shared := newMemShared(t, tokA)
	h := hub.New(hub.Options{Shared: shared})
	shared.hub.Store(h)
	t.Cleanup(h.Close)
	caps := answercap.New()
	t.Cleanup(caps.Follow(h, store.Room))
	// No acknowledgement for want of time in this test: only once handled.
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL(), ackWithin: time.Hour}
	m := New(Options{Hub: h, Caps: caps, Routes: map[string][]Channel{tokA: {sl}}})
	t.Cleanup(m.Close)
	answered := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?", Timeout: time.Hour})
		answered <- rep
	}()
	ts := api.Call(t, "chat.postMessage", 1)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts}); return ok })

	shared.fail.Store(true)
	acked := make(chan error, 1)
	go func() { acked <- api.Send(t.Context(), "events_api", slacktest.ThreadReply("U42", dm, ts, "Ship it.")) }()
	eventually(t, "the answer refused by the store", func() bool { return shared.refused.Load() > 0 })
	select {
	case err := <-acked:
		t.Fatalf("the reply was acknowledged (%v) before its answer was saved", err)
	default:
	}
	shared.fail.Store(false)
	if rep := answer(t, answered); rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
	if err := <-acked; err != nil {
		t.Fatalf("the reply was not acknowledged once saved: %v", err)
	}
}
