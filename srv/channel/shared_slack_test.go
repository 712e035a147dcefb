package channel_test

import (
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/srv/channel"
)

const (
	slackBot = "xoxb-9-secret-bot-token"
	slackApp = "xapp-9-A1-secret-app-token"
	slackDM  = "D42" // U42's DM with the app
)

// slackNode is an instance's Slack channel, to U42's DM, over the double.
func slackNode(t *testing.T, n *node, api *slacktest.API) *channel.Slack {
	sl := &channel.Slack{BotToken: slackBot, AppToken: slackApp, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	m := channel.New(channel.Options{Hub: n.hub, Caps: n.caps, Routes: map[string][]channel.Channel{tokA: {sl}}, Notes: n.ch, Leader: n.ch})
	t.Cleanup(m.Close)
	return sl
}

// slackNoted reports whether n reads what the message ts asks.
func slackNoted(t *testing.T, n *node, sl *channel.Slack, ts string) func() bool {
	return func() bool { _, ok, _ := n.ch.Get(t.Context(), channel.SlackNoteKey(sl, slackDM, ts)); return ok }
}

// TestSlackAcrossInstances: a question posted by instance A is answered
// by a press, and by a thread reply, delivered to instance B, which
// holds the app's Socket Mode connection; B, where the answer is
// written (and so told), updates A's message to say so. One instance at
// a time holds the connection.
func TestSlackAcrossInstances(t *testing.T) {
	api := slacktest.Start(t, slackBot, slackApp)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	slackNode(t, b, api)
	if err := api.Connected(t.Context()); err != nil {
		t.Fatal(err)
	}
	sl := slackNode(t, a, api)

	answered := askOn(a.hub, "q-1")
	ts := api.Call(t, "chat.postMessage", 1)["_ts"]
	waitUntil(t, "B reads what the message asks", slackNoted(t, b, sl, ts))
	api.Envelope(t, "interactive", slacktest.Press("U42", slackDM, ts, "a:0"))
	if rep := recv(t, "the agent's answer", answered); rep == nil || rep.Contents[0].GetText().GetText() != "Yes" {
		t.Fatalf("the agent got %+v", rep)
	}
	// Answered on B, told on B: B updates the message A posted.
	upd := api.Call(t, "chat.update", 1)
	blocks, err := slacktest.BlocksOf(upd)
	if err != nil || upd["channel"] != slackDM || upd["ts"] != ts || len(blocks) != 1 ||
		!strings.HasPrefix(blocks[0].Text.Text, "Claude Code asks") || !strings.Contains(blocks[0].Text.Text, "— Answered on Slack") {
		t.Errorf("the settled update %v: %v", upd, err)
	}

	answered = askOn(a.hub, "q-2")
	ts = api.Call(t, "chat.postMessage", 2)["_ts"]
	waitUntil(t, "B reads what the message asks", slackNoted(t, b, sl, ts))
	api.Envelope(t, "events_api", slacktest.ThreadReply("U42", slackDM, ts, "Ship it."))
	if rep := recv(t, "the agent's answer", answered); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
	if upd := api.Call(t, "chat.update", 2); upd["ts"] != ts || !strings.Contains(upd["blocks"], "Answered on Slack") {
		t.Errorf("the settled update: %v", upd)
	}
	if n := len(callsOf(t, api, "apps.connections.open")); n != 1 {
		t.Errorf("%d Socket Mode connections opened, want B's alone", n)
	}
}

// callsOf are the forms of the calls of method the double has had.
func callsOf(t *testing.T, api *slacktest.API, method string) []map[string]string {
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
