package channel

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// receiver is a double of an outside service: it records what is posted
// to it and answers what status says (201/200 by default).
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []*http.Request
	bodies [][]byte
	status func(n int) int
	hang   chan struct{} // when set, requests wait for it
	wake   chan struct{}
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{wake: make(chan struct{}, 100)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		if r.hang != nil {
			select {
			case <-r.hang:
			case <-req.Context().Done():
				return
			}
		}
		r.mu.Lock()
		r.got = append(r.got, req)
		r.bodies = append(r.bodies, b)
		n := len(r.got)
		st := r.status
		r.mu.Unlock()
		code := http.StatusOK
		if st != nil {
			code = st(n)
		}
		w.WriteHeader(code)
		r.wake <- struct{}{}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) waitFor(t *testing.T, n int) ([]*http.Request, [][]byte) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		got, bodies := append([]*http.Request(nil), r.got...), append([][]byte(nil), r.bodies...)
		r.mu.Unlock()
		if len(got) >= n {
			return got, bodies
		}
		select {
		case <-r.wake:
		case <-deadline:
			t.Fatalf("%d requests, want %d", len(got), n)
		}
	}
}

const tokA, tokB = "token-a-0123456789abcdef", "token-b-0123456789abcdef"

type fixture struct {
	hub    *hub.Hub
	m      *Manager
	public *httptest.Server // the server's public address: its answer endpoint
}

func newFixture(t *testing.T, routes map[string][]Channel, o Options) *fixture {
	t.Helper()
	h := hub.New(hub.Options{})
	t.Cleanup(h.Close)
	caps := answercap.New()
	t.Cleanup(caps.Follow(h, store.Room))
	mux := http.NewServeMux()
	mux.Handle("POST /push/answer", caps.Answer(h, time.Now, slog.New(slog.DiscardHandler), func(*http.Request) {}))
	// As the server does: one handler for an ID, that of the first
	// webhook of that ID met (in token order here).
	hooked := map[string]bool{}
	for _, tok := range slices.Sorted(maps.Keys(routes)) {
		for _, c := range routes[tok] {
			if w, ok := c.(*Webhook); ok && !hooked[w.ID] {
				hooked[w.ID] = true
				mux.Handle("POST /channels/webhook/"+w.ID+"/answer", w.Answers(h))
			}
		}
	}
	public := httptest.NewServer(mux)
	t.Cleanup(public.Close)
	o.Hub, o.Caps, o.Routes, o.PublicURL = h, caps, routes, public.URL
	m := New(o)
	t.Cleanup(m.Close)
	return &fixture{hub: h, m: m, public: public}
}

func (f *fixture) ask(token, id string) chan *hub.Reply {
	out := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := f.hub.Ask(context.Background(), token, hub.Request{Kind: wire.AskQuestion, ID: id, Text: "Deploy **now**?",
			ProjectDirectory: "/srv/shop", AgentName: "Claude Code", Timeout: time.Hour})
		out <- rep
	}()
	return out
}

// answer waits for the agent's answer to come back on ch.
func answer(t *testing.T, ch chan *hub.Reply) *hub.Reply {
	t.Helper()
	return within(t, "the agent's answer", ch)
}

// within waits up to 10 s for what to come on ch.
func within[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
		var zero T
		return zero
	}
}

// eventually waits for cond to hold, looking at it every millisecond, and
// fails the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("never %s", what)
		}
	}
}

// TestNtfy: a question is published to the topic as JSON with a title,
// priority, tags, a click URL to the app and "http" actions; replaying
// the second action's post, as the ntfy app would, answers the question
// with it; a settled question is told quietly, under the question's
// sequence ID so that it replaces it; the access token goes as
// a bearer token. Another token's question publishes nothing.
func TestNtfy(t *testing.T) {
	ntfy := newReceiver(t)
	f := newFixture(t, map[string][]Channel{tokA: {&Ntfy{URL: ntfy.URL, Topic: "aa-secret-topic", AccessToken: "tk_abc"}}}, Options{})
	f.ask(tokB, "other")
	answered := f.ask(tokA, "q-1")
	got, bodies := ntfy.waitFor(t, 1)
	if got[0].Header.Get("Authorization") != "Bearer tk_abc" || got[0].Header.Get("Content-Type") != "application/json" {
		t.Errorf("headers: %v", got[0].Header)
	}
	var m ntfyMessage
	if err := json.Unmarshal(bodies[0], &m); err != nil {
		t.Fatal(err)
	}
	if m.Topic != "aa-secret-topic" || m.Title != "shop · Claude Code asks" || m.Message != "Deploy **now**?" || !m.Markdown ||
		m.Priority != 4 || m.Click != f.public.URL+"/" || len(m.Actions) != 3 {
		t.Fatalf("published %+v", m)
	}
	if strings.Contains(string(bodies[0]), tokA) {
		t.Error("the token was published")
	}
	act := m.Actions[1]
	if act.Action != "http" || act.Label != "No" || act.URL != f.public.URL+"/push/answer" || !act.Clear {
		t.Fatalf("action %+v", act)
	}
	req, _ := http.NewRequest(act.Method, act.URL, strings.NewReader(act.Body))
	for k, v := range act.Headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the action's post: %d", resp.StatusCode)
	}
	if rep := answer(t, answered); rep == nil || rep.Contents[0].GetText().GetText() != "No" || rep.Door != "ntfy" {
		t.Fatalf("the agent got %+v", rep)
	}
	got, bodies = ntfy.waitFor(t, 2)
	var settled ntfyMessage
	_ = json.Unmarshal(bodies[1], &settled)
	if settled.Priority != 2 || settled.Title != "shop · Answered on ntfy: No" || len(settled.Actions) != 0 {
		t.Errorf("settled: %+v", settled)
	}
	// The same sequence ID: ntfy replaces the question's notification.
	if m.SequenceID == "" || settled.SequenceID != m.SequenceID || got[1].Header.Get("X-Sequence-ID") != m.SequenceID ||
		strings.Contains(m.SequenceID, "q-1") {
		t.Errorf("sequence IDs %q, then %q (header %q)", m.SequenceID, settled.SequenceID, got[1].Header.Get("X-Sequence-ID"))
	}
	resp, err = http.Post(act.URL, "application/json", strings.NewReader(m.Actions[0].Body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGone {
		t.Errorf("the other button after the answer: %d, want 410", resp.StatusCode)
	}
}

// sign is the webhook signature as a receiver computes it from the
// documented scheme, without the package's Sign.
func sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(ts, 10) + "."))
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// TestWebhook: every event is posted as JSON, signed over its timestamp
// and body; a signed answer answers the question, once: the same
// signed request again, a wrong signature, a stale timestamp or another
// token's question change nothing.
func TestWebhook(t *testing.T) {
	recv := newReceiver(t)
	hookA := &Webhook{ID: "n8n", URL: recv.URL, Secret: "s3cret", Token: tokA}
	hookB := &Webhook{ID: "other", URL: recv.URL, Secret: "other-secret", Token: tokB}
	f := newFixture(t, map[string][]Channel{tokA: {hookA}, tokB: {hookB}}, Options{})
	answered := f.ask(tokA, "q-1")
	got, bodies := recv.waitFor(t, 1)
	ts, _ := strconv.ParseInt(got[0].Header.Get(TimestampHeader), 10, 64)
	if got[0].Header.Get(SignatureHeader) != sign("s3cret", ts, bodies[0]) {
		t.Fatalf("the event's signature does not verify")
	}
	var e webhookEvent
	_ = json.Unmarshal(bodies[0], &e)
	if e.Type != "asked" || e.ID != "q-1" || e.Kind != "question" || e.Text != "Deploy **now**?" || e.Answer == nil || e.Answer.Signed != "/channels/webhook/n8n/answer" {
		t.Fatalf("event %+v", e)
	}

	post := func(secret string, at time.Time, body string) int {
		ts := at.Unix()
		req, _ := http.NewRequest("POST", f.public.URL+e.Answer.Signed, strings.NewReader(body))
		req.Header.Set(TimestampHeader, strconv.FormatInt(ts, 10))
		req.Header.Set(SignatureHeader, sign(secret, ts, []byte(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// A body of more than one meaning, signed or not, is refused.
	for _, b := range []string{
		`{"id":"q-1","text":"Ship it.","text":"Roll back."}`,
		`{"id":"q-1","text":"Ship it.","Text":"Roll back."}`,
		`{"id":"q-1","text":"Ship it."}{"id":"q-1","text":"Roll back."}`,
	} {
		if code := post("s3cret", time.Now(), b); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", b, code)
		}
	}
	body := `{"id":"q-1","text":"Ship it.","by":"Ana"}`
	if code := post("wrong", time.Now(), body); code != http.StatusUnauthorized {
		t.Errorf("a wrong signature: %d", code)
	}
	if code := post("s3cret", time.Now().Add(-10*time.Minute), body); code != http.StatusUnauthorized {
		t.Errorf("a stale timestamp: %d", code)
	}
	now := time.Now()
	if code := post("s3cret", now, body); code != http.StatusOK {
		t.Fatalf("the signed answer: %d", code)
	}
	if rep := answer(t, answered); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it." || rep.Nickname != "Ana (webhook n8n)" {
		t.Fatalf("the agent got %+v", rep)
	}
	if code := post("s3cret", now, body); code != http.StatusConflict {
		t.Errorf("a replay: %d, want 409", code)
	}
	_, bodies = recv.waitFor(t, 2)
	_ = json.Unmarshal(bodies[1], &e)
	if e.Type != "answered" || e.Reply != "Ship it." || e.AnsweredBy != "Ana (webhook n8n)" {
		t.Errorf("answered event %+v", e)
	}
	f.ask(tokB, "q-b")
	recv.waitFor(t, 3)
	if code := post("s3cret", time.Now(), `{"id":"q-b","text":"Hijacked."}`); code != http.StatusConflict {
		t.Errorf("token A's webhook answering token B's question: %d, want 409", code)
	}
}

// TestFaultyChannelsDelayNothing: a channel that fails is tried again
// with backoff until it takes the notice; one that hangs delays neither
// another channel nor the agent's answer from the inbox.
func TestFaultyChannelsDelayNothing(t *testing.T) {
	flaky, hung, fine := newReceiver(t), newReceiver(t), newReceiver(t)
	flaky.status = func(n int) int {
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	hung.hang = make(chan struct{})
	t.Cleanup(func() { close(hung.hang) })
	f := newFixture(t, map[string][]Channel{tokA: {
		&Ntfy{URL: flaky.URL, Topic: "t"}, &Webhook{ID: "hung", URL: hung.URL, Secret: "x", Token: tokA}, &Ntfy{URL: fine.URL, Topic: "t"},
	}}, Options{Backoff: time.Millisecond})
	answered := f.ask(tokA, "q-1")
	fine.waitFor(t, 1)
	flaky.waitFor(t, 3)
	if err := f.hub.Answer(context.Background(), tokA, wire.AskQuestion, "q-1", hub.Reply{ClientID: "pc", Nickname: "PC", Door: "ws"}); err != nil {
		t.Fatal(err)
	}
	answer(t, answered)
	fine.waitFor(t, 2)
}
