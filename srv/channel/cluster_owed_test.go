package channel_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/channel"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// refuser stands between an instance and the Bot API: it refuses the
// edits (a 502, the service out of reach) until let go, and counts the
// edits refused and passed.
type refuser struct {
	refusing         atomic.Bool
	refused, through atomic.Int32
	url              string
}

func newRefuser(t *testing.T, api string) *refuser {
	u, err := url.Parse(api)
	if err != nil {
		t.Fatal(err)
	}
	r := &refuser{}
	r.refusing.Store(true)
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // a poll cut as the test ends
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/editMessageText") {
			if r.refusing.Load() {
				r.refused.Add(1)
				http.Error(w, `{"ok":false,"error_code":502,"description":"Bad Gateway"}`, http.StatusBadGateway)
				return
			}
			r.through.Add(1)
		}
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// TestClusterEditOwedTakenOver: in a cluster, a settled question's edit
// that failed every try is noted owed and tried again by the instance
// holding the channel's lease; once that instance dies, the next holder
// takes it over and makes it when the service is back.
func TestClusterEditOwedTakenOver(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	start := func(n *node, via string) *channel.Telegram {
		tg := &channel.Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: via}
		o := channel.Options{Hub: n.hub, Caps: n.caps, Routes: map[string][]channel.Channel{tokA: {tg}},
			Notes: n.ch, Leader: n.ch, Tries: 1, Backoff: time.Millisecond}
		channel.SetOwedScan(&o, 50*time.Millisecond)
		m := channel.New(o)
		t.Cleanup(m.Close)
		return tg
	}
	ra, rb := newRefuser(t, api.URL), newRefuser(t, api.URL)
	start(b, rb.url)
	waitUntil(t, "b polls", func() bool { return api.Polls() > 0 })
	tg := start(a, ra.url)

	answered := askOn(a.hub, "q-1")
	msg, _ := strconv.Atoi(api.Call(t, "sendMessage", 1)["sent_message_id"])
	waitUntil(t, "B reads what the message asks", func() bool {
		_, ok, _ := b.ch.Get(t.Context(), channel.TelegramNoteKey(tg, 42, msg))
		return ok
	})
	api.Push(telegramtest.Reply(42, 500, msg, "Ship it."))
	recv(t, "the agent's answer", answered)
	// B, where the answer was written and which holds the lease, is
	// refused its edit, then tries it again.
	waitUntil(t, "B tries the edit owed again", func() bool { return rb.refused.Load() >= 2 })

	_ = b.c.Close() // B dies: its lease lapses
	waitUntil(t, "A, the next holder, tries the edit owed", func() bool { return ra.refused.Load() >= 1 })
	rb.refusing.Store(false)
	ra.refusing.Store(false)
	// A tries it again after its backoff (owedWait, doubling).
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	call, err := api.Wait(ctx, "editMessageText", 1)
	if err != nil {
		t.Fatal("the edit owed never made:", err)
	}
	if got := call.Form; got["message_id"] != strconv.Itoa(msg) || !strings.Contains(got["text"], "Answered") {
		t.Errorf("the edit made at last: %v", got)
	}
	if ra.through.Load() != 1 || rb.through.Load() != 0 {
		t.Errorf("edits passed: %d through A, %d through B; want A's alone", ra.through.Load(), rb.through.Load())
	}
}

// ntfyCounter is an ntfy server that counts the notifications that
// replace a question's (settled: no buttons, low priority).
type ntfyCounter struct {
	settled atomic.Int32
	titles  chan string
}

func newNtfyCounter(t *testing.T) (*ntfyCounter, string) {
	c := &ntfyCounter{titles: make(chan string, 16)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var m struct {
			Title    string            `json:"title"`
			Priority int               `json:"priority"`
			Actions  []json.RawMessage `json:"actions"`
		}
		if err := json.NewDecoder(req.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if m.Priority == 2 && len(m.Actions) == 0 {
			c.settled.Add(1)
			c.titles <- m.Title
		}
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

// owedNoted reports whether n's notes list a follow-up owed of the
// question id, made (done) or not (its first send owed is not one).
func owedNoted(t *testing.T, n *node, id string, done bool) bool {
	found := false
	if err := n.ch.Scan(t.Context(), "owed.", func(v []byte) error {
		var rec struct {
			ID   string        `json:"i"`
			Kind hub.EventKind `json:"k"`
			Done bool          `json:"done"`
		}
		found = found || json.Unmarshal(v, &rec) == nil && rec.ID == id && rec.Kind != hub.Asked && rec.Done == done
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return found
}

// TestClusterFollowUpOfAKilledInstance: a question is published to ntfy
// through instance A; B, where it is answered, dies before it noted the
// follow-up owed (here: it never follows anything up). A, the holder of
// ntfy's lease, finds the question sent and settled in the store, and
// replaces its notification, once, saying how it was answered.
func TestClusterFollowUpOfAKilledInstance(t *testing.T) {
	ntfy, url := newNtfyCounter(t)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	o := channel.Options{Hub: a.hub, Caps: a.caps, Routes: map[string][]channel.Channel{tokA: {&channel.Ntfy{URL: url, Topic: "t"}}},
		Notes: a.ch, Leader: a.ch}
	channel.SetOwedScan(&o, 50*time.Millisecond)
	m := channel.New(o)
	t.Cleanup(m.Close)

	answer := func(id, who string) {
		t.Helper()
		answered := askOn(a.hub, id)
		waitUntil(t, "the question noted as sent", func() bool { return owedNoted(t, a, id, false) })
		waitUntil(t, "B has the question", func() bool { return b.hub.Validity(tokA, []string{id})[id] })
		if err := b.hub.Answer(t.Context(), tokA, wire.AskQuestion, id, hub.Reply{Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Yes"}}},
			ClientID: "ws:" + who, Nickname: who}); err != nil {
			t.Fatal(err)
		}
		recv(t, "the agent's answer", answered)
		if got := recv(t, "the notification replaced", ntfy.titles); got != "Answered on "+who+": Yes" {
			t.Errorf("the notification replaced says %q", got)
		}
		waitUntil(t, "the follow-up noted made", func() bool { return owedNoted(t, a, id, true) })
	}
	answer("q-1", "Ana")
	// A started again scans the notes, where q-1's follow-up is noted
	// made: it finds q-2's alone.
	m.Close()
	m = channel.New(o)
	t.Cleanup(m.Close)
	answer("q-2", "Bob")
	if n := ntfy.settled.Load(); n != 2 {
		t.Errorf("notifications replaced %d times, want 2", n)
	}
}

// TestClusterFollowUpOfAClearedQuestion: a question settled while no
// instance followed it up, and its record cleared from the history
// before an instance that never heard of it took the lease, kept its
// notification as waiting for good (the scan skipped it at every turn,
// its outcome not known). As one server does, it is followed up as no
// longer pending.
func TestClusterFollowUpOfAClearedQuestion(t *testing.T) {
	ntfy, url := newNtfyCounter(t)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	ch := []channel.Channel{&channel.Ntfy{URL: url, Topic: "t"}}
	o := channel.Options{Hub: a.hub, Caps: a.caps, Routes: map[string][]channel.Channel{tokA: ch}, Notes: a.ch, Leader: a.ch}
	channel.SetOwedScan(&o, 50*time.Millisecond)
	m := channel.New(o)
	answered := askOn(a.hub, "q-1")
	waitUntil(t, "the question noted as sent", func() bool { return owedNoted(t, a, "q-1", false) })
	m.Close() // a's channels stop before the settle is heard
	waitUntil(t, "B has the question", func() bool { return b.hub.Validity(tokA, []string{"q-1"})["q-1"] })
	if err := b.hub.Answer(t.Context(), tokA, wire.AskQuestion, "q-1", hub.Reply{Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Yes"}}},
		ClientID: "ws:Ana", Nickname: "Ana"}); err != nil {
		t.Fatal(err)
	}
	recv(t, "the agent's answer", answered)
	if n, err := b.hub.ClearHistory(tokA); err != nil || n != 1 {
		t.Fatalf("cleared %d records: %v", n, err)
	}

	c := startNode(t, ns.URL(), "c") // heard nothing of q-1
	oc := channel.Options{Hub: c.hub, Caps: c.caps, Routes: map[string][]channel.Channel{tokA: ch}, Notes: c.ch, Leader: c.ch}
	channel.SetOwedScan(&oc, 50*time.Millisecond)
	mc := channel.New(oc)
	t.Cleanup(mc.Close)
	if got := recv(t, "the notification replaced", ntfy.titles); got != "No longer pending" {
		t.Errorf("the notification replaced says %q", got)
	}
}
