package channel_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/srv/channel"
)

// TestAskedAgainWhileAskerSends: instance A asked a question and is
// sending it, slowly (ntfy has not answered yet); the agent re-attaches
// through B, which takes the request over and is told the question
// again. B does not send it while A's claim holds, and finds it sent
// once A's send went through: ntfy has it once.
func TestAskedAgainWhileAskerSends(t *testing.T) {
	var publishes atomic.Int32
	came, release := make(chan struct{}, 1), make(chan struct{})
	ntfy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if publishes.Add(1) == 1 {
			came <- struct{}{}
			<-release // the asker's send, slow
		}
		_, _ = w.Write([]byte(`{"id":"x"}`))
	}))
	t.Cleanup(ntfy.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	// What B's channels log is read below; the rest (A's channels, both
	// hubs and cluster links but for their heartbeats' debug lines) is
	// told only when the test fails: a failure under load is read from
	// the instances' own words.
	logs, rest := &lines{}, &lines{}
	logTo := func(l *lines, name string, level slog.Level) *slog.Logger {
		return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: level})).With("instance", name)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("B's channels logged:\n%s\nthe rest:\n%s", logs.String(), rest.String())
		}
	})
	ns := natstest.Start(t)
	a, b := startNodeLogged(t, ns.URL(), "a", logTo(rest, "a", slog.LevelInfo)),
		startNodeLogged(t, ns.URL(), "b", logTo(rest, "b", slog.LevelInfo))
	start := func(n *node, log *slog.Logger) *channel.Manager {
		c := &channel.Ntfy{URL: ntfy.URL, Topic: "aa-again"}
		m := channel.New(channel.Options{Hub: n.hub, Caps: n.caps, Routes: map[string][]channel.Channel{tokA: {c}},
			Notes: n.ch, Leader: n.ch, Logger: log})
		t.Cleanup(m.Close)
		return m
	}
	start(a, logTo(rest, "a", slog.LevelDebug))
	mb := start(b, logTo(logs, "b", slog.LevelDebug))

	askOn(a.hub, "again-1")
	select {
	case <-came:
	case <-time.After(10 * time.Second):
		t.Fatal("A never sent the question")
	}
	askOn(b.hub, "again-1") // the agent re-attaches through B
	waitUntil(t, "B finds A sending it", func() bool { return logs.has("being made by another instance") })
	close(release)
	waitUntil(t, "B finds the question sent", func() bool { return channel.Owing(mb) == 0 })
	if n := publishes.Load(); n != 1 {
		t.Fatalf("ntfy was sent the question %d times, want 1", n)
	}
}

// lines is a log, written and read at once.
type lines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Contains(l.b.Bytes(), []byte(s))
}

// TestScanLeavesAFreshFirstSendToItsAsker: the channel's lease holder
// reads the cluster's notes as the instance that asked a question has
// just noted its first send owed, and not yet claimed it: it leaves
// the send to its asker for AskingGrace, and sends it once that has
// passed (here no asker sends it).
func TestScanLeavesAFreshFirstSendToItsAsker(t *testing.T) {
	var publishes atomic.Int32
	ntfy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		publishes.Add(1)
		_, _ = w.Write([]byte(`{"id":"x"}`))
	}))
	t.Cleanup(ntfy.Close)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	o := channel.Options{Hub: b.hub, Caps: b.caps, Routes: map[string][]channel.Channel{tokA: {&channel.Ntfy{URL: ntfy.URL, Topic: "aa-fresh"}}},
		Notes: b.ch, Leader: b.ch}
	channel.SetOwedScan(&o, 20*time.Millisecond)
	mb := channel.New(o)
	t.Cleanup(mb.Close)

	askOn(a.hub, "fresh-1") // A has no channels: it never sends it
	waitUntil(t, "B has the question", func() bool { _, shown, _ := b.hub.Waiting(tokA, "fresh-1"); return shown })
	noted := time.Now()
	channel.NoteFirstSendOwed(mb, tokA, "fresh-1")
	waitUntil(t, "B's scan finds the send owed", func() bool { return channel.Owing(mb) == 1 || publishes.Load() > 0 })
	if n := publishes.Load(); n > 0 {
		t.Fatalf("B sent a question its asker had just noted owed %d time(s)", n)
	}
	// Its asker claims it after a round trip to NATS, which a busy
	// cluster can take a second or more over.
	if channel.AskingGrace < time.Second {
		t.Fatalf("an asker has %v to claim the send it noted, want a second or more", channel.AskingGrace)
	}
	// The note keeps its time on the wall clock only: so is it compared.
	if at := channel.OwedAt(mb); len(at) != 1 || at[0].Round(0).Before(noted.Round(0).Add(channel.AskingGrace)) {
		t.Fatalf("B tries the send owed at %v, want at %v or later", at, noted.Add(channel.AskingGrace))
	}
	waitUntil(t, "B sends it, its asker's time over", func() bool { return publishes.Load() == 1 })
}
