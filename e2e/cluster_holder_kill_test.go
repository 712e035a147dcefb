//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/faultproxy"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	srvcluster "github.com/agentassistant/agentassistant/srv/cluster"
	"github.com/nats-io/nats.go/jetstream"
)

// A channel's lease holder killed (kill -9) or cut from NATS in the
// middle of handling a person's answer. Each test counts what it asked,
// what the agent was answered, what was lost and what came twice.

// holderPair is two instances of a cluster with the same channel
// config, each reaching NATS through a link of its own, and which of
// them holds the channel's lease.
type holderPair struct {
	srvs          map[string]*server
	links         map[string]*faultproxy.Proxy
	js            jetstream.JetStream
	holder, other string
}

func startHolderPair(t *testing.T, ns *natstest.Server, config string) *holderPair {
	t.Helper()
	p := &holderPair{srvs: map[string]*server{}, links: map[string]*faultproxy.Proxy{}}
	for _, name := range []string{"a", "b"} {
		l, err := faultproxy.Start(strings.TrimPrefix(ns.URL(), "nats://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		p.links[name] = l
		// On a port of its own: an instance starting afresh (its
		// storage lost) binds it again.
		data := t.TempDir()
		path := filepath.Join(data, "channels.toml")
		if err := os.WriteFile(path, []byte(fmt.Sprintf("tokens = [%q]\n%s", tokenA, config)), 0o600); err != nil {
			t.Fatal(err)
		}
		p.srvs[name] = startServerWith(t, freePort(t), data, []string{"-config", path, "-nats-url", "nats://" + l.Addr(), "-instance", name}, tokenA)
	}
	p.js = jetStreamAt(t, ns.URL())
	p.holder = leaseHolder(t, p.js, func(string) bool { return true })
	p.other = map[string]string{"a": "b", "b": "a"}[p.holder]
	return p
}

// askOn asks id through s, its outcome on the channel returned.
func askOn(t *testing.T, s *server, id, question string) <-chan *pb.AskQuestionResponse {
	out := make(chan *pb.AskQuestionResponse, 1)
	go func() {
		r, err := connectAsk(context.Background(), s, id, question)
		if err != nil {
			t.Errorf("ask %s: %v", id, err)
		}
		out <- r
	}()
	return out
}

// tally counts the questions of a run: asked, answered (as the person
// answered), lost (never answered) and doubled (answered twice, or
// with something else).
type tally struct{ asked, answered, lost, doubled int }

func (c *tally) want(t *testing.T, id string, done <-chan *pb.AskQuestionResponse, answer string) {
	t.Helper()
	c.asked++
	select {
	case r := <-done:
		if got := r.GetContents(); len(got) != 1 || got[0].GetText().GetText() != answer {
			c.doubled++
			t.Errorf("%s: the agent got %v, want %q", id, got, answer)
			return
		}
		c.answered++
	case <-time.After(60 * time.Second):
		c.lost++
		t.Errorf("%s: the agent never got %q", id, answer)
	}
}

func (c *tally) log(t *testing.T, what string) {
	t.Logf("%s: asked %d, answered %d, lost %d, doubled %d", what, c.asked, c.answered, c.lost, c.doubled)
}

// tgEdits counts the edits of message msg that took its buttons away.
func tgEdits(tg *telegramtest.API, msg int) int {
	n := 0
	_ = tg.WaitFor(context.Background(), func(calls []telegramtest.Call) bool {
		for _, c := range calls {
			if c.Method == "editMessageText" && c.Form["message_id"] == strconv.Itoa(msg) && c.Form["_error"] == "" {
				n++
			}
		}
		return true
	})
	return n
}

// tgTold is what the taps were told (answerCallbackQuery's texts).
func tgTold(tg *telegramtest.API) []string {
	var out []string
	_ = tg.WaitFor(context.Background(), func(calls []telegramtest.Call) bool {
		for _, c := range calls {
			if c.Method == "answerCallbackQuery" {
				out = append(out, c.Form["text"])
			}
		}
		return true
	})
	return out
}

// TestClusterTelegramHolderKilledMidTap: the person taps an answer of a
// question asked through the instance that does not poll the bot. The
// poller is killed (kill -9) in the middle of handling that tap: once
// it fetched the update and before the answer was saved (its link to
// NATS silent, so it cannot save), and, in a second run, once the
// answer was saved and before the getUpdates that would confirm the
// update (held by the double). The other instance takes the lease and
// is handed the tap again: the answer is taken once, the tap is told it
// answered (not "Not taken", not "no longer pending"), and the message
// loses its buttons once.
func TestClusterTelegramHolderKilledMidTap(t *testing.T) {
	for _, at := range []string{"fetched", "saved"} {
		t.Run(at, func(t *testing.T) {
			tg := telegramtest.Start(t, tgToken)
			ns := natstest.Start(t)
			p := startHolderPair(t, ns, telegramConfig(tg.URL))
			var c tally
			done := askOn(t, p.srvs[p.other], "tg-tap", "Deploy now?")
			form := tg.Call(t, "sendMessage", 1)
			msg := must[int](t)(strconv.Atoi(form["sent_message_id"]))
			kb := must[telegramtest.Keyboard](t)(telegramtest.KeyboardOf(form))
			waitNoted(t, p.js, "tg-tap")
			button := kb.InlineKeyboard[0][0]
			release := func() {}
			switch at {
			case "fetched":
				p.links[p.holder].SetSilent(true)
				tg.Push(telegramtest.Callback(chat, msg, button.CallbackData))
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				if err := tg.Handed(ctx, 1); err != nil {
					t.Fatal(err)
				}
				cancel()
			case "saved":
				var confirming <-chan struct{}
				confirming, release = tg.HoldWhen("getUpdates", func(f map[string]string) bool {
					n, _ := strconv.Atoi(f["offset"])
					return n > 1
				})
				t.Cleanup(release)
				tg.Push(telegramtest.Callback(chat, msg, button.CallbackData))
				select {
				case <-confirming:
				case <-time.After(30 * time.Second):
					t.Fatal("the tap was never confirmed")
				}
			}
			p.srvs[p.holder].kill9(t)
			release() // the dead poller's confirmation never comes; the next one's does
			leaseHolder(t, p.js, func(h string) bool { return h == p.other })
			c.want(t, "tg-tap", done, button.Text)
			// The tap handed again to the new poller, and confirmed.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := tg.ConfirmedBy(ctx, 1); err != nil {
				t.Fatal("the tap was never confirmed by the new poller")
			}
			wantEdited(t, tg, msg)
			if n := tgEdits(tg, msg); n != 1 {
				c.doubled++
				t.Errorf("the message was edited %d times, want once", n)
			}
			for _, said := range tgTold(tg) {
				if said != "Answered: "+button.Text {
					t.Errorf("the tap was told %q", said)
				}
			}
			for _, said := range tg.Said("Not taken") {
				t.Errorf("the person was told %q", said)
			}
			c.log(t, "killed once "+at)
		})
	}
}

// TestClusterSlackHolderKilledMidPress: the person presses an answer;
// the instance holding Slack's lease (its Socket Mode connection open)
// is killed once the press's envelope was sent to it, before it saved
// the answer (its link to NATS silent) or acknowledged the envelope.
// Slack sends the envelope again to the connection of the instance that
// takes the lease: the answer is taken once, the person is told
// nothing (no "no longer pending"), and the message is updated once.
func TestClusterSlackHolderKilledMidPress(t *testing.T) {
	sl := slacktest.Start(t, slBot, slApp)
	ns := natstest.Start(t)
	p := startHolderPair(t, ns, slackConfig(sl.APIURL()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sl.Connected(ctx); err != nil {
		t.Fatal(err)
	}
	var c tally
	done := askOn(t, p.srvs[p.other], "sl-press", "Go on?")
	form := sl.Call(t, "chat.postMessage", 1)
	ts := form["_ts"]
	value, label := slackButton(t, form)
	waitNoted(t, p.js, "sl-press")

	p.links[p.holder].SetSilent(true)
	press := slacktest.Press(slUser, slacktest.DM(slUser), ts, value)
	acked := make(chan error, 1)
	go func() { acked <- sl.Send(ctx, "interactive", press) }()
	if err := sl.Sent(ctx, 1); err != nil {
		t.Fatal(err)
	}
	p.srvs[p.holder].kill9(t)
	leaseHolder(t, p.js, func(h string) bool { return h == p.other })
	if err := sl.Dialled(ctx, 2); err != nil {
		t.Fatal(err)
	}
	sl.Redelivered(t, "interactive", press)
	c.want(t, "sl-press", done, label)
	wantUpdated(t, sl, ts)
	if n := slackUpdates(sl, ts); n != 1 {
		c.doubled++
		t.Errorf("the message was updated %d times, want once", n)
	}
	_ = sl.WaitFor(ctx, func(calls []slacktest.Call) bool {
		for _, call := range calls {
			if call.Method == "chat.postEphemeral" {
				t.Errorf("the press was told %q", call.Form["text"])
			}
		}
		return true
	})
	slackNotTaken(t, sl)
	c.log(t, "holder killed before its ack")
}

// TestClusterSlackHolderCutOff: the link to NATS of the instance holding
// Slack's lease goes silent for 20 s, and the person presses an answer
// and replies in another question's thread just then. The holder stops
// leading within its lease (its connection closed), the other takes the
// lease and opens its own; each answer is taken once, whichever instance
// takes it, no one is told "Not taken" or "no longer pending", and each
// message is updated once.
func TestClusterSlackHolderCutOff(t *testing.T) {
	sl := slacktest.Start(t, slBot, slApp)
	ns := natstest.Start(t)
	p := startHolderPair(t, ns, slackConfig(sl.APIURL()))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := sl.Connected(ctx); err != nil {
		t.Fatal(err)
	}
	var c tally
	pressed := askOn(t, p.srvs[p.other], "sl-cut-1", "Go on with one?")
	form := sl.Call(t, "chat.postMessage", 1)
	ts1 := form["_ts"]
	value, label := slackButton(t, form)
	waitNoted(t, p.js, "sl-cut-1")
	// Both asked through the other: an agent's call held by the instance
	// cut off ends as unavailable, for agentassistant-mcp to re-attach.
	replied := askOn(t, p.srvs[p.other], "sl-cut-2", "Go on with two?")
	ts2 := sl.Call(t, "chat.postMessage", 2)["_ts"]
	waitNoted(t, p.js, "sl-cut-2")

	p.links[p.holder].SetSilent(true)
	cut := time.Now()
	back := time.AfterFunc(20*time.Second, func() { p.links[p.holder].SetSilent(false) })
	t.Cleanup(func() { back.Stop() })
	press := slacktest.Press(slUser, slacktest.DM(slUser), ts1, value)
	reply := slacktest.ThreadReply(slUser, slacktest.DM(slUser), ts2, "two it is")
	for _, env := range []struct {
		typ     string
		payload map[string]any
	}{{"interactive", press}, {"events_api", reply}} {
		// Slack sends again what is not acknowledged within seconds, to
		// a connection alive: the next one once the holder let go.
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		err := sl.Send(sctx, env.typ, env.payload)
		scancel()
		if err != nil {
			if err := sl.Dialled(ctx, 2); err != nil {
				t.Fatal(err)
			}
			sl.Redelivered(t, env.typ, env.payload)
		}
	}
	leaseHolder(t, p.js, func(h string) bool { return h == p.other })
	tookOver := time.Since(cut)
	c.want(t, "sl-cut-1", pressed, label)
	c.want(t, "sl-cut-2", replied, "two it is")
	wantUpdated(t, sl, ts1, ts2)
	for _, ts := range []string{ts1, ts2} {
		if n := slackUpdates(sl, ts); n != 1 {
			c.doubled++
			t.Errorf("message %s updated %d times, want once", ts, n)
		}
	}
	_ = sl.WaitFor(ctx, func(calls []slacktest.Call) bool {
		for _, call := range calls {
			// Acknowledged before it was saved (Slack's 3 s), the press
			// is told so, and nothing else.
			if call.Method == "chat.postEphemeral" && !strings.Contains(call.Form["text"], "not saved yet") {
				t.Errorf("the press was told %q", call.Form["text"])
			}
		}
		return true
	})
	slackNotTaken(t, sl)
	c.log(t, "holder cut 20 s")
	t.Logf("lease taken over %v after the cut", tookOver.Round(100*time.Millisecond))
}

// TestClusterEmailHolderKilledBeforeSeen: the instance watching the
// mailbox takes the person's reply (the agent has it) and is killed
// (kill -9) before the mail is marked \Seen (the STORE held by the
// mailbox). The other instance takes the lease and reads the mail
// again: it is the person's own winning answer, taken once, no mail
// says "Not taken", and the follow-up mail goes once.
func TestClusterEmailHolderKilledBeforeSeen(t *testing.T) {
	sink := startMailSink(t)
	box := startMailbox(t)
	ns := natstest.Start(t)
	p := startHolderPair(t, ns, emailConfig(sink, box))
	var c tally
	question := "Go on with the mail?"
	done := askOn(t, p.srvs[p.other], "em-kill", question)
	asked := messageID(sink.question(t, question))
	waitNoted(t, p.js, "em-kill")
	marking, release := box.holdSeen()
	t.Cleanup(release)
	box.deliver(t, replyTo(1, asked, "Yes, by mail."))
	c.want(t, "em-kill", done, "Yes, by mail.")
	select {
	case <-marking:
	case <-time.After(30 * time.Second):
		t.Fatal("the reply was never marked read")
	}
	p.srvs[p.holder].kill9(t)
	release() // the dead watcher's marking is not made
	leaseHolder(t, p.js, func(h string) bool { return h == p.other })
	box.waitSeen(t, 1)
	for _, m := range sink.said("Not taken") {
		c.doubled++
		t.Errorf("the person was mailed %q", m)
	}
	if n := len(sink.said("No reply is needed")); n > 1 {
		c.doubled++
		t.Errorf("the follow-up was mailed %d times", n)
	}
	c.log(t, "holder killed before \\Seen")
}

// slackButton is the value and label of the first button of a posted
// question.
func slackButton(t *testing.T, form map[string]string) (value, label string) {
	t.Helper()
	blocks := must[[]slacktest.Block](t)(slacktest.BlocksOf(form))
	for _, b := range blocks {
		for _, e := range b.Elements {
			if e.Type == "button" {
				return e.Value, e.Text.Text
			}
		}
	}
	t.Fatalf("the question has no button: %s", form["blocks"])
	return "", ""
}

// slackUpdates counts the updates of message ts that went through.
func slackUpdates(sl *slacktest.API, ts string) int {
	n := 0
	_ = sl.WaitFor(context.Background(), func(calls []slacktest.Call) bool {
		for _, c := range calls {
			if c.Method == "chat.update" && c.Form["ts"] == ts && c.Form["_error"] == "" {
				n++
			}
		}
		return true
	})
	return n
}

// TestClusterTelegramStorageWiped: two instances take a bot's replies
// (one holds the lease); a question asked through the other is answered
// by a reply, and the edit of its message is owed (Telegram refuses it).
// NATS then comes back without its storage: every note of the channels
// (which message asks what, the edit owed, the lease) is gone with the
// requests. Each instance logs what it knew of that loss (the instance
// trying the edit names it: its message keeps its buttons) and starts
// afresh in its own process; the bot's replies are taken again without
// anyone restarting the instances: a question asked afterwards is
// answered through Telegram.
func TestClusterTelegramStorageWiped(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	var refusing atomic.Bool
	refusing.Store(true)
	u, err := url.Parse(tg.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // a poll cut by the fresh start
	link := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/editMessageText") && refusing.Load() {
			http.Error(w, `{"ok":false,"error_code":502,"description":"Bad Gateway"}`, http.StatusBadGateway)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(link.Close)
	ns := natstest.Start(t)
	p := startHolderPair(t, ns, telegramConfig(link.URL))
	var c tally
	done := askOn(t, p.srvs[p.other], "tg-wipe", "Deploy before the wipe?")
	msg := must[int](t)(strconv.Atoi(tg.Call(t, "sendMessage", 1)["sent_message_id"]))
	waitNoted(t, p.js, "tg-wipe")
	tg.Push(telegramtest.Reply(chat, 501, msg, "Ship it."))
	c.want(t, "tg-wipe", done, "Ship it.")
	watchBucket(t, p.js, srvcluster.NotesBucket, func(v []byte) bool {
		var owed struct {
			ID    string `json:"i"`
			Since string `json:"since"`
		}
		return len(v) > 8 && json.Unmarshal(v[8:], &owed) == nil && owed.ID == "tg-wipe" && owed.Since != ""
	})
	// The edit failed every try: it is owed, tried again later.
	waitLogAny(t, []*server{p.srvs[p.holder], p.srvs[p.other]}, "channel notice not delivered", "id=tg-wipe")

	ns.Wipe()
	for _, s := range p.srvs {
		waitLog(t, s, "NATS lost the cluster's storage")
	}
	waitLogAny(t, []*server{p.srvs[p.holder], p.srvs[p.other]}, "edits owed lost with the cluster's storage", "ids=tg-wipe")
	for _, s := range p.srvs {
		for try := 0; strings.Count(s.logw.String(), `msg="cluster mode"`) < 2; try++ { // the fresh run
			if try == 1500 {
				t.Fatal("an instance never started afresh")
			}
			time.Sleep(20 * time.Millisecond)
		}
		healthIs(t, s, http.StatusOK)
	}
	refusing.Store(false)
	again := askOn(t, p.srvs[p.other], "tg-after-wipe", "Deploy after the wipe?")
	msg2 := must[int](t)(strconv.Atoi(tg.Call(t, "sendMessage", 2)["sent_message_id"]))
	waitNoted(t, p.js, "tg-after-wipe")
	tg.Push(telegramtest.Reply(chat, 502, msg2, "Ship it again."))
	c.want(t, "tg-after-wipe", again, "Ship it again.")
	for _, said := range tg.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
	c.log(t, "storage wiped with an edit owed")
	t.Logf("edits owed lost: 1 (message %d keeps its buttons)", msg)
}
