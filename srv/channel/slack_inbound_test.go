package channel

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/slacktest"
)

// slackFixture is a Slack channel serving tokA in U42's DM, listening,
// and the double it talks to.
func slackFixture(t *testing.T) (*slacktest.API, *Slack, *fixture) {
	t.Helper()
	const botToken, appToken = "xoxb-3-secret-bot-token", "xapp-3-A1-secret-app-token"
	api := slacktest.Start(t, botToken, appToken)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	return api, sl, newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
}

// calls are the forms of the calls of method the double has had.
func calls(t *testing.T, api *slacktest.API, method string) []map[string]string {
	t.Helper()
	var out []map[string]string
	_ = api.WaitFor(t.Context(), func(cs []slacktest.Call) bool {
		for _, c := range cs {
			if c.Method == method {
				out = append(out, c.Form)
			}
		}
		return true
	})
	return out
}

// toldTo waits for an ephemeral message to user.
func toldTo(t *testing.T, api *slacktest.API, user string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := api.WaitFor(ctx, func(cs []slacktest.Call) bool {
		return slices.ContainsFunc(cs, func(c slacktest.Call) bool { return c.Method == "chat.postEphemeral" && c.Form["user"] == user })
	})
	if err != nil {
		t.Fatalf("%s was told nothing", user)
	}
}

// TestSlackRedeliveryAnswersOnce: Socket Mode delivers an envelope again
// when its acknowledgement was late; the same thread reply, or the same
// press, delivered twice answers once and tells the person nothing
// false ("Not taken", "no longer pending") about the answer they gave.
func TestSlackRedeliveryAnswersOnce(t *testing.T) {
	api, sl, f := slackFixture(t)
	const dm = "D42"
	answered := f.ask(tokA, "q-1")
	ts := api.Call(t, "chat.postMessage", 1)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts}); return ok })
	reply := slacktest.ThreadReply("U42", dm, ts, "Ship it.")
	api.Envelope(t, "events_api", reply)
	if rep := answer(t, answered); rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
	api.Redelivered(t, "events_api", reply)

	second := f.ask(tokA, "q-2")
	ts2 := api.Call(t, "chat.postMessage", 2)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts2}); return ok })
	press := slacktest.Press("U42", dm, ts2, "a:0")
	api.Envelope(t, "interactive", press)
	if rep := answer(t, second); rep.Contents[0].GetText().GetText() != "Yes" {
		t.Fatalf("the agent got %+v", rep)
	}
	api.Redelivered(t, "interactive", press)

	// Envelopes are handled in order: once a stranger is told off, the
	// redeliveries before have been handled.
	api.Envelope(t, "interactive", slacktest.Press("U99", dm, ts2, "a:0"))
	toldTo(t, api, "U99")
	if got := calls(t, api, "chat.postMessage"); len(got) != 2 {
		t.Errorf("posted %v, want the 2 questions only: a redelivered reply was answered again", got[2:])
	}
	if got := calls(t, api, "chat.postEphemeral"); len(got) != 1 {
		t.Errorf("told %v, want only the stranger", got)
	}
}

// TestSlackRepliesNotLost: a thread reply also sent to the channel, or
// one with a file, answers with its text; a reply in the thread of a
// question no longer pending is answered "Not taken" in the thread;
// the bot's own messages there (that answer among them) answer nothing
// and are not answered.
func TestSlackRepliesNotLost(t *testing.T) {
	api, sl, f := slackFixture(t)
	const dm = "D42"
	answered := f.ask(tokA, "q-1")
	ts := api.Call(t, "chat.postMessage", 1)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts}); return ok })
	broadcast := slacktest.ThreadReply("U42", dm, ts, "Ship it.")
	broadcast["event"].(map[string]any)["subtype"] = "thread_broadcast"
	api.Envelope(t, "events_api", broadcast)
	if rep := answer(t, answered); rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
	api.Call(t, "chat.update", 1)

	echo := slacktest.ThreadReply("U42", dm, ts, "Not taken: the question is no longer pending.")
	echo["event"].(map[string]any)["bot_id"] = "B1"
	api.Envelope(t, "events_api", echo)
	api.Envelope(t, "events_api", slacktest.ThreadReply("U42", dm, ts, "And tell Bo."))
	if got := api.Call(t, "chat.postMessage", 2); got["thread_ts"] != ts || !strings.Contains(got["text"], "Not taken") ||
		!strings.Contains(got["text"], "no longer pending") {
		t.Errorf("a reply to a settled question: %v", got)
	}

	second := f.ask(tokA, "q-2")
	ts2 := api.Call(t, "chat.postMessage", 3)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts2}); return ok })
	withFile := slacktest.ThreadReply("U42", dm, ts2, "Use this layout.")
	withFile["event"].(map[string]any)["subtype"] = "file_share"
	withFile["event"].(map[string]any)["files"] = []any{map[string]any{"id": "F1", "name": "layout.png", "mimetype": "image/png"}}
	api.Envelope(t, "events_api", withFile)
	if rep := answer(t, second); rep.Contents[0].GetText().GetText() != "Use this layout." {
		t.Fatalf("the agent got %+v", rep)
	}
	if got := calls(t, api, "chat.postMessage"); len(got) != 3 {
		t.Errorf("posted %v: the bot answered its own message", got[3:])
	}
}
