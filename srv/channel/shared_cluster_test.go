package channel_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/channel"
	"github.com/agentassistant/agentassistant/srv/cluster"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// testLease is the lease of the tests' clusters: short, so that a
// holder gone is replaced within the test.
const testLease = time.Second

// node is one instance of a cluster: its hub, its link, and the
// channels' share of it.
type node struct {
	name string
	c    *cluster.Cluster
	hub  *hub.Hub
	ch   *cluster.Channels
	caps *answercap.Store
}

// startNode starts an instance named name of the cluster at url,
// serving tokA.
func startNode(t *testing.T, url, name string) *node {
	t.Helper()
	return startNodeLogged(t, url, name, nil)
}

// startNodeLogged is startNode with its cluster and hub logging to log
// (nil: nowhere).
func startNodeLogged(t *testing.T, url, name string, log *slog.Logger) *node {
	t.Helper()
	ctx := t.Context()
	c, err := cluster.Open(ctx, cluster.Options{URL: url, Tokens: []string{tokA}, Instance: name, Heartbeat: 50 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h := hub.New(hub.Options{Shared: c, Instance: name, OrphanNotice: time.Hour, Logger: log})
	if err := c.Start(h, func() int { return 0 }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(); _ = c.Close() })
	<-c.Ready()
	ch, err := c.OpenChannels(ctx, testLease)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.OpenPush(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	caps, err := answercap.NewShared(p.CapKey, p, p.Token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(caps.Follow(h, store.Room))
	return &node{name: name, c: c, hub: h, ch: ch, caps: caps}
}

// TestNotes: both stores keep a value until its time, tell a key not
// there from an error, forget on Delete, and refuse a value over
// channel.MaxNote.
func TestNotes(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) channel.Notes{
		"memory": func(*testing.T) channel.Notes { return channel.NewMemoryNotes(nil) },
		"jetstream": func(t *testing.T) channel.Notes {
			return startNode(t, natstest.Start(t).URL(), "a").ch
		},
	} {
		t.Run(name, func(t *testing.T) {
			n, ctx := open(t), t.Context()
			if _, ok, err := n.Get(ctx, "telegram.1.42.101"); ok || err != nil {
				t.Fatalf("an empty store: found %v, err %v", ok, err)
			}
			later := time.Now().Add(time.Hour)
			long := "<" + strings.Repeat("x", 2000) + "@mail.example.org>" // a Message-ID may be long, and hold any character
			for _, k := range []string{"telegram.1.42.101", long} {
				if err := n.Put(ctx, k, []byte(`{"r":"room"}`), later); err != nil {
					t.Fatal(err)
				}
				if v, ok, err := n.Get(ctx, k); !ok || err != nil || string(v) != `{"r":"room"}` {
					t.Fatalf("%.20s: got %q, %v, %v", k, v, ok, err)
				}
			}
			if err := n.Put(ctx, "gone", []byte("v"), time.Now().Add(-time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := n.Get(ctx, "gone"); ok {
				t.Error("a note past its time is still found")
			}
			if err := n.Delete(ctx, long); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := n.Get(ctx, long); ok {
				t.Error("a deleted note is still found")
			}
			if err := n.Delete(ctx, "never"); err != nil {
				t.Errorf("deleting a key not there: %v", err)
			}
			if err := n.Put(ctx, "big", bytes.Repeat([]byte("x"), channel.MaxNote+1), later); err == nil {
				t.Error("a note over channel.MaxNote was kept")
			}
			if err := n.Put(ctx, "max", bytes.Repeat([]byte("x"), channel.MaxNote), later); err != nil {
				t.Errorf("a note of channel.MaxNote: %v", err)
			}
		})
	}
}

// TestLeaderRuns: both leaders run run, end its context when theirs
// ends, and return only once run has.
func TestLeaderRuns(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) channel.Leader{
		"alone":     func(*testing.T) channel.Leader { return channel.Alone{} },
		"jetstream": func(t *testing.T) channel.Leader { return startNode(t, natstest.Start(t).URL(), "a").ch },
	} {
		t.Run(name, func(t *testing.T) {
			l := open(t)
			ctx, cancel := context.WithCancel(t.Context())
			running, returned := make(chan struct{}), make(chan struct{})
			var runDone atomic.Bool
			go func() {
				defer close(returned)
				l.Lead(ctx, "telegram.abc", func(ctx context.Context) {
					close(running)
					<-ctx.Done()
					runDone.Store(true)
				})
			}()
			recv(t, "the run", running)
			cancel()
			recv(t, "Lead's return", returned)
			if !runDone.Load() {
				t.Error("Lead returned before run did")
			}
		})
	}
}

// leadCount runs l's lead of name on a goroutine until the test ends,
// counting its runs; running reports whether one runs now.
type leadCount struct {
	runs    atomic.Int32
	running atomic.Bool
	stop    context.CancelFunc
	done    chan struct{}
}

func lead(t *testing.T, l channel.Leader, name string, both *atomic.Int32) *leadCount {
	ctx, cancel := context.WithCancel(context.Background())
	lc := &leadCount{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(lc.done)
		l.Lead(ctx, name, func(ctx context.Context) {
			if both.Add(1) > 1 {
				t.Error("two instances lead at once")
			}
			lc.runs.Add(1)
			lc.running.Store(true)
			<-ctx.Done()
			lc.running.Store(false)
			both.Add(-1)
		})
	}()
	t.Cleanup(func() { cancel(); <-lc.done })
	return lc
}

// TestLeaseMovesOn: of two instances one leads; when it lets go the
// other takes over, and when it is gone without a word (its link to
// NATS cut, as a process killed) the other takes over once its lease
// lapses.
func TestLeaseMovesOn(t *testing.T) {
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	var both atomic.Int32
	la := lead(t, a.ch, "telegram.abc", &both)
	waitUntil(t, "a leads", la.running.Load)
	lb := lead(t, b.ch, "telegram.abc", &both)

	la.stop() // a shuts down
	<-la.done
	waitUntil(t, "b takes over from a that let go", lb.running.Load)

	c := startNode(t, ns.URL(), "c")
	lc := lead(t, c.ch, "telegram.abc", &both)
	_ = b.c.Close() // b is gone: it cannot let go
	waitUntil(t, "c takes over from b gone", lc.running.Load)
	if lc.runs.Load() != 1 {
		t.Errorf("c ran %d times", lc.runs.Load())
	}
}

// telegramNode is an instance's channel.Telegram channel over the bot api.
func telegramNode(t *testing.T, n *node, api *telegramtest.API, botToken string) *channel.Telegram {
	tg := &channel.Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	m := channel.New(channel.Options{Hub: n.hub, Caps: n.caps, Routes: map[string][]channel.Channel{tokA: {tg}}, Notes: n.ch, Leader: n.ch})
	t.Cleanup(m.Close)
	return tg
}

func askOn(h *hub.Hub, id string, opts ...string) chan *hub.Reply {
	out := make(chan *hub.Reply, 1)
	go func() {
		req := hub.Request{Kind: wire.AskQuestion, ID: id, Text: "Deploy?", AgentName: "Claude Code", Timeout: time.Hour}
		rep, err := h.Ask(context.Background(), tokA, req)
		if err != nil && !errors.Is(err, hub.ErrClosed) {
			rep = &hub.Reply{Nickname: "error: " + err.Error()}
		}
		out <- rep
	}()
	return out
}

// TestTelegramAcrossInstances: a question sent through instance A is
// answered by a reply, and by a tap, that instance B polls, and B, where
// the answer is written, edits A's message to say so; the bot's
// updates are polled by one instance at a time (the Bot API would end
// the other's with 409 Conflict).
func TestTelegramAcrossInstances(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	telegramNode(t, b, api, botToken)
	waitUntil(t, "b polls", func() bool { return api.Polls() > 0 })
	tg := telegramNode(t, a, api, botToken)
	noted := func(msg int) func() bool {
		return func() bool { _, ok, _ := b.ch.Get(t.Context(), channel.TelegramNoteKey(tg, 42, msg)); return ok }
	}

	answered := askOn(a.hub, "q-1")
	msg, _ := strconv.Atoi(api.Call(t, "sendMessage", 1)["sent_message_id"])
	waitUntil(t, "B reads what the message asks", noted(msg))
	api.Push(telegramtest.Reply(42, 500, msg, "Ship it."))
	if rep := recv(t, "the agent's answer", answered); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
	// Answered on B, told on B: B edits the message A sent.
	if got := api.Call(t, "editMessageText", 1); got["message_id"] != strconv.Itoa(msg) || !strings.Contains(got["text"], "Answered") {
		t.Errorf("the settled edit: %v", got)
	}

	answered = askOn(a.hub, "q-2")
	msg, _ = strconv.Atoi(api.Call(t, "sendMessage", 2)["sent_message_id"])
	waitUntil(t, "B reads what the message asks", noted(msg))
	api.Push(telegramtest.Callback(42, msg, "a:0"))
	if got := api.Call(t, "answerCallbackQuery", 1); !strings.HasPrefix(got["text"], "Answered: ") {
		t.Errorf("the tap was told %q", got["text"])
	}
	if rep := recv(t, "the agent's answer", answered); rep == nil || rep.Nickname == "" || strings.HasPrefix(rep.Nickname, "error") {
		t.Fatalf("the agent got %+v", rep)
	}
	if n := api.Conflicts(); n > 0 {
		t.Errorf("%d getUpdates ended by another: two instances poll the bot", n)
	}
}

const tokA = "tok-a-1234567890"

// waitUntil waits for cond to hold, checking each millisecond.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("never %s", what)
		}
	}
}

// recv waits for what to come on ch.
func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s", what)
	}
	var zero T
	return zero
}

// TestNotesCreate: in both stores one of two creates of a key makes it,
// whichever instance asks; a note past its time, or deleted, is made
// again.
func TestNotesCreate(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) (channel.Notes, channel.Notes){
		"memory": func(*testing.T) (channel.Notes, channel.Notes) {
			n := channel.NewMemoryNotes(nil)
			return n, n
		},
		"jetstream": func(t *testing.T) (channel.Notes, channel.Notes) {
			ns := natstest.Start(t)
			return startNode(t, ns.URL(), "a").ch, startNode(t, ns.URL(), "b").ch
		},
	} {
		t.Run(name, func(t *testing.T) {
			a, b := open(t)
			ctx := t.Context()
			later := time.Now().Add(time.Hour)
			if ok, err := a.Create(ctx, "told.1", []byte("a"), later); !ok || err != nil {
				t.Fatalf("the first create: %v, %v", ok, err)
			}
			if ok, err := b.Create(ctx, "told.1", []byte("b"), later); ok || err != nil {
				t.Errorf("the second create, from another instance: %v, %v", ok, err)
			}
			if v, _, _ := b.Get(ctx, "told.1"); string(v) != "a" {
				t.Errorf("the note is %q", v)
			}
			if ok, err := a.Create(ctx, "told.2", []byte("a"), time.Now().Add(-time.Second)); !ok || err != nil {
				t.Fatalf("a create past its time: %v, %v", ok, err)
			}
			if ok, err := b.Create(ctx, "told.2", []byte("b"), later); !ok || err != nil {
				t.Errorf("a create over a note past its time: %v, %v", ok, err)
			}
			if err := a.Delete(ctx, "told.1"); err != nil {
				t.Fatal(err)
			}
			if ok, err := b.Create(ctx, "told.1", []byte("b"), later); !ok || err != nil {
				t.Errorf("a create over a deleted note: %v, %v", ok, err)
			}
		})
	}
}
