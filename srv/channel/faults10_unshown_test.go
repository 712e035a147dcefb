package channel_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/channel"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// ntfyLog is an ntfy double that keeps each publish, in the order the
// publishes were answered: "asked <seq>" for a question (it has
// buttons), "settled <seq>" for a follow-up. hold, when set, holds the
// first question's publish until it is closed.
type ntfyLog struct {
	mu   sync.Mutex
	got  []string
	came chan string
	hold chan struct{}
	held bool
}

func newNtfyLog(t *testing.T, hold chan struct{}) (*ntfyLog, string) {
	l := &ntfyLog{came: make(chan string, 64), hold: hold}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			Seq     string            `json:"sequence_id"`
			Actions []json.RawMessage `json:"actions"`
		}
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		what := "settled " + m.Seq
		if len(m.Actions) > 0 {
			what = "asked " + m.Seq
			l.mu.Lock()
			first := !l.held && l.hold != nil
			l.held = l.held || first
			l.mu.Unlock()
			if first {
				l.came <- "holding " + m.Seq
				<-l.hold
			}
		}
		l.mu.Lock()
		l.got = append(l.got, what)
		l.mu.Unlock()
		l.came <- what
		_, _ = w.Write([]byte(`{"id":"x"}`))
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if hold != nil {
			select {
			case <-hold:
			default:
				close(hold)
			}
		}
	})
	return l, srv.URL
}

func (l *ntfyLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got...)
}

func answerOn(t *testing.T, n *node, id string) {
	t.Helper()
	waitUntil(t, n.name+" has "+id, func() bool { return n.hub.Validity(tokA, []string{id})[id] })
	if err := n.hub.Answer(t.Context(), tokA, wire.AskQuestion, id, hub.Reply{Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Yes"}}},
		ClientID: "ws:Ana", Nickname: "Ana"}); err != nil {
		t.Fatal(err)
	}
}

// TestFaults10NoFollowUpOfAQuestionNeverSent: a question asked through
// instance A, which sent it to no channel (killed first, say), is
// answered at once through B: B's ntfy was never sent the question, so
// it is sent no follow-up of it either. The next question, asked and
// answered through B, is sent and followed up, once each, in order.
func TestFaults10NoFollowUpOfAQuestionNeverSent(t *testing.T) {
	nt, url := newNtfyLog(t, nil)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	m := channel.New(channel.Options{Hub: b.hub, Caps: b.caps, Routes: map[string][]channel.Channel{tokA: {&channel.Ntfy{URL: url, Topic: "t"}}},
		Notes: b.ch, Leader: b.ch, PublicURL: "https://aa.example"})
	t.Cleanup(m.Close)

	unsent := askOn(a.hub, "q-unsent")
	answerOn(t, b, "q-unsent")
	recv(t, "the agent's answer", unsent)
	sent := askOn(b.hub, "q-sent")
	answerOn(t, b, "q-sent")
	recv(t, "the agent's answer", sent)
	// B's queue is in order: once q-sent's follow-up is in, so is what
	// it made of q-unsent's settle.
	for recv(t, "a publish", nt.came) != "settled "+channel.SeqOf(m, tokA, "q-sent") {
	}
	want := []string{"asked " + channel.SeqOf(m, tokA, "q-sent"), "settled " + channel.SeqOf(m, tokA, "q-sent")}
	if got := nt.all(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("ntfy was published %q, want %q (q-unsent %s)", got, want, channel.SeqOf(m, tokA, "q-unsent"))
	}
}

// TestFollowUpMadeOnceNoSendIsClaimed: a question asked through
// instance A, whose send a sender claimed and never noted (killed as it
// sent, or of the release before, which leaves the settle's mark as it
// found it), is answered through B. B's follow-up waits while the claim
// holds, and is made once it lapsed: the question may have gone out, and
// left with its buttons it would ask on for good.
func TestFollowUpMadeOnceNoSendIsClaimed(t *testing.T) {
	nt, url := newNtfyLog(t, nil)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	m := channel.New(channel.Options{Hub: b.hub, Caps: b.caps, Routes: map[string][]channel.Channel{tokA: {&channel.Ntfy{URL: url, Topic: "t"}}},
		Notes: b.ch, Leader: b.ch, PublicURL: "https://aa.example"})
	t.Cleanup(m.Close)

	claim := channel.AskingKey(tokA, "q-1", 0, "ntfy")
	if _, err := b.ch.Create(t.Context(), claim, []byte("a"), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	answered := askOn(a.hub, "q-1")
	answerOn(t, b, "q-1")
	recv(t, "the agent's answer", answered)
	waitUntil(t, "B owes the follow-up", func() bool { return channel.Owing(m) == 1 })
	if got := nt.all(); len(got) != 0 {
		t.Fatalf("ntfy was published %q while the send was claimed", got)
	}
	if err := b.ch.Delete(t.Context(), claim); err != nil { // lapsed
		t.Fatal(err)
	}
	seq := channel.SeqOf(m, tokA, "q-1")
	if got := recv(t, "the follow-up", nt.came); got != "settled "+seq {
		t.Fatalf("ntfy got %q, want the follow-up of %s", got, seq)
	}
}

// TestFaults10FollowUpAfterItsQuestion: instance A is sending its
// question to ntfy (slowly) when it is answered through B: B's
// follow-up waits for the question's send, and goes after it, once.
func TestFaults10FollowUpAfterItsQuestion(t *testing.T) {
	nt, url := newNtfyLog(t, make(chan struct{}))
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	var ms []*channel.Manager
	for _, n := range []*node{a, b} {
		m := channel.New(channel.Options{Hub: n.hub, Caps: n.caps, Routes: map[string][]channel.Channel{tokA: {&channel.Ntfy{URL: url, Topic: "t"}}},
			Notes: n.ch, Leader: n.ch, PublicURL: "https://aa.example"})
		t.Cleanup(m.Close)
		ms = append(ms, m)
	}
	seq := channel.SeqOf(ms[0], tokA, "q-1")
	answered := askOn(a.hub, "q-1")
	if got := recv(t, "A's publish", nt.came); got != "holding "+seq {
		t.Fatalf("ntfy got %q first", got)
	}
	answerOn(t, b, "q-1")
	recv(t, "the agent's answer", answered)
	// B owes the follow-up (or, made at once, it is in).
	waitUntil(t, "B handles the settle", func() bool { return channel.Owing(ms[1]) == 1 || len(nt.all()) > 0 })
	close(nt.hold)
	waitUntil(t, "the question and its follow-up in", func() bool { return len(nt.all()) >= 2 })
	waitUntil(t, "B made the follow-up", func() bool { return channel.Owing(ms[1]) == 0 })
	if got, want := nt.all(), []string{"asked " + seq, "settled " + seq}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("ntfy was published %q, want %q", got, want)
	}
}
