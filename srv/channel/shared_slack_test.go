package channel_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/srv/channel"
)

const (
	slackBot = "xoxb-9-secret-bot-token"
	slackApp = "xapp-9-A1-secret-app-token"
	slackDM  = "D42" // U42's DM with the app
)

// slackNode is an instance's Slack channel, to U42's DM, over the
// double, and the Manager that runs it.
func slackNode(t *testing.T, n *node, api *slacktest.API) (*channel.Slack, *channel.Manager) {
	sl := &channel.Slack{BotToken: slackBot, AppToken: slackApp, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	m := channel.New(channel.Options{Hub: n.hub, Caps: n.caps, Routes: map[string][]channel.Channel{tokA: {sl}}, Notes: n.ch, Leader: n.ch})
	t.Cleanup(m.Close)
	return sl, m
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
	sl, _ := slackNode(t, a, api)

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

// TestSlackRedeliveredToAnother: a thread reply and a press taken by
// instance B, which then lets go of the Socket Mode connection, are
// delivered again by Slack to instance A, which took it over (their
// acknowledgement was late): A knows neither event, and still tells the
// person nothing about the answers they gave, which were taken.
func TestSlackRedeliveredToAnother(t *testing.T) {
	api := slacktest.Start(t, slackBot, slackApp)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	_, mb := slackNode(t, b, api)
	if err := api.Connected(t.Context()); err != nil {
		t.Fatal(err)
	}
	sl, _ := slackNode(t, a, api)

	answered := askOn(a.hub, "q-1")
	ts := api.Call(t, "chat.postMessage", 1)["_ts"]
	waitUntil(t, "B reads what the message asks", slackNoted(t, b, sl, ts))
	reply := slacktest.ThreadReply("U42", slackDM, ts, "Ship it.")
	api.Envelope(t, "events_api", reply)
	if rep := recv(t, "the agent's answer", answered); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
	api.Call(t, "chat.update", 1)

	answered = askOn(a.hub, "q-2")
	ts2 := api.Call(t, "chat.postMessage", 2)["_ts"]
	waitUntil(t, "B reads what the message asks", slackNoted(t, b, sl, ts2))
	press := slacktest.Press("U42", slackDM, ts2, "a:1")
	api.Envelope(t, "interactive", press)
	if rep := recv(t, "the agent's answer", answered); rep == nil || rep.Contents[0].GetText().GetText() != "No" {
		t.Fatalf("the agent got %+v", rep)
	}
	api.Call(t, "chat.update", 2)

	mb.Close() // B shuts down: A takes the connection over
	if err := api.Dialled(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	api.Redelivered(t, "events_api", reply)
	api.Redelivered(t, "interactive", press)
	// Envelopes are handled in order: once a stranger is told off, the
	// redeliveries before have been handled.
	api.Envelope(t, "interactive", slacktest.Press("U99", slackDM, ts2, "a:0"))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := api.WaitFor(ctx, func(cs []slacktest.Call) bool {
		return slices.ContainsFunc(cs, func(c slacktest.Call) bool { return c.Method == "chat.postEphemeral" && c.Form["user"] == "U99" })
	})
	if err != nil {
		t.Fatal("the stranger was told nothing")
	}
	if got := callsOf(t, api, "chat.postMessage"); len(got) != 2 {
		t.Errorf("posted %v, want the 2 questions only: a reply taken was told it was not", got[2:])
	}
	if got := callsOf(t, api, "chat.postEphemeral"); len(got) != 1 || got[0]["user"] != "U99" {
		t.Errorf("told %v, want only the stranger: a press taken was told it was not", got)
	}
}

// TestSlackLeadLostMidPress: the instance holding the Socket Mode
// connection acknowledges a press (Slack will not send it again) and
// loses its lead while it reads the press's question (its link to NATS
// slow, the lease not renewed in time). The press still answers: what
// was acknowledged is handled to its end, not dropped with the lead.
func TestSlackLeadLostMidPress(t *testing.T) {
	api := slacktest.Start(t, slackBot, slackApp)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	sl := &channel.Slack{BotToken: slackBot, AppToken: slackApp, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	gate := newGateNotes(b.ch)
	lb := newHandLeader()
	close(lb.lead)
	mb := channel.New(channel.Options{Hub: b.hub, Caps: b.caps, Routes: map[string][]channel.Channel{tokA: {sl}}, Notes: gate, Leader: lb})
	t.Cleanup(mb.Close)
	if err := api.Connected(t.Context()); err != nil {
		t.Fatal(err)
	}
	slA := &channel.Slack{BotToken: slackBot, AppToken: slackApp, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	ma := channel.New(channel.Options{Hub: a.hub, Caps: a.caps, Routes: map[string][]channel.Channel{tokA: {slA}}, Notes: a.ch, Leader: newHandLeader()})
	t.Cleanup(ma.Close)

	answered := askOn(a.hub, "q-1")
	ts := api.Call(t, "chat.postMessage", 1)["_ts"]
	waitUntil(t, "B reads what the message asks", slackNoted(t, b, sl, ts))
	gate.arm(channel.SlackNoteKey(sl, slackDM, ts))
	done := make(chan struct{})
	go func() {
		defer close(done)
		api.Envelope(t, "interactive", slacktest.Press("U42", slackDM, ts, "a:0"))
	}()
	recv(t, "B's read of the press's question", gate.entered)
	recv(t, "the press acknowledged", done)
	close(lb.lost)
	close(gate.open)
	if rep := recv(t, "the agent's answer", answered); rep == nil || rep.Contents[0].GetText().GetText() != "Yes" {
		t.Fatalf("the agent got %+v", rep)
	}
}

// TestSlackPhotoTooLargeForCluster: a thread reply whose photo makes an
// answer larger than NATS's max_payload (1 MiB by default) is told at
// once why it is not taken, not after trying again for nothing; the
// question stays for a reply without it.
func TestSlackPhotoTooLargeForCluster(t *testing.T) {
	api := slacktest.Start(t, slackBot, slackApp)
	ns := natstest.Start(t)
	a := startNode(t, ns.URL(), "a")
	sl, _ := slackNode(t, a, api)

	answered := askOn(a.hub, "q-1")
	ts := api.Call(t, "chat.postMessage", 1)["_ts"]
	waitUntil(t, "A reads what the message asks", slackNoted(t, a, sl, ts))
	photo := append([]byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00"), make([]byte, 900<<10)...)
	api.Envelope(t, "events_api", slacktest.FileReply("U42", slackDM, ts, "Here is the bug.", api.AddFile("F1", "IMG_1.jpg", "image/jpeg", photo)))
	if told := api.Call(t, "chat.postMessage", 2); told["thread_ts"] != ts || !strings.Contains(told["text"], "Not taken: its images make the answer too large") {
		t.Errorf("the person was told %v", told)
	}
	api.Envelope(t, "events_api", slacktest.ThreadReply("U42", slackDM, ts, "Ship it."))
	if rep := recv(t, "the agent's answer", answered); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
}

// TestSlackFileReplyRedeliveredToAnother: thread replies with a photo,
// one with text and one without, taken by instance B, which then lets
// go of the Socket Mode connection, are delivered again by Slack to
// instance A: A tells the person nothing about the answers they gave,
// which were taken, images and all.
func TestSlackFileReplyRedeliveredToAnother(t *testing.T) {
	api := slacktest.Start(t, slackBot, slackApp)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	_, mb := slackNode(t, b, api)
	if err := api.Connected(t.Context()); err != nil {
		t.Fatal(err)
	}
	sl, _ := slackNode(t, a, api)
	photo := append([]byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00"), make([]byte, 1000)...)

	var replies []map[string]any
	for i, text := range []string{"Here is the bug.", ""} {
		answered := askOn(a.hub, fmt.Sprint("q-", i))
		ts := api.Call(t, "chat.postMessage", i+1)["_ts"]
		waitUntil(t, "B reads what the message asks", slackNoted(t, b, sl, ts))
		reply := slacktest.FileReply("U42", slackDM, ts, text, api.AddFile(fmt.Sprint("F", i), "IMG.jpg", "image/jpeg", photo))
		api.Envelope(t, "events_api", reply)
		rep := recv(t, "the agent's answer", answered)
		if rep == nil || len(rep.Contents) == 0 || rep.Contents[len(rep.Contents)-1].GetImage() == nil {
			t.Fatalf("the agent got %+v, want the photo last", rep)
		}
		api.Call(t, "chat.update", i+1)
		replies = append(replies, reply)
	}

	mb.Close() // B shuts down: A takes the connection over
	if err := api.Dialled(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	for _, r := range replies {
		api.Redelivered(t, "events_api", r)
	}
	// Envelopes are handled in order: once a stranger is told off, the
	// redeliveries before have been handled.
	ts := callsOf(t, api, "chat.postMessage")[1]["_ts"]
	api.Envelope(t, "interactive", slacktest.Press("U99", slackDM, ts, "a:0"))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := api.WaitFor(ctx, func(cs []slacktest.Call) bool {
		return slices.ContainsFunc(cs, func(c slacktest.Call) bool { return c.Method == "chat.postEphemeral" && c.Form["user"] == "U99" })
	}); err != nil {
		t.Fatal("the stranger was told nothing")
	}
	if got := callsOf(t, api, "chat.postMessage"); len(got) != 2 {
		t.Errorf("posted %v, want the 2 questions only: a reply taken was told it was not", got[2:])
	}
}
