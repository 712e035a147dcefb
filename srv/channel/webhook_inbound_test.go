package channel

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// memShared is a cluster's store of requests (hub.Shared) in memory,
// for one token, whose writes of an outcome fail while fail is set (a
// full disk under NATS): each change is applied to the hub in order,
// as the cluster's watch does.
type memShared struct {
	token string
	fail  atomic.Bool
	// refused counts the writes refused while fail was set.
	refused atomic.Int32
	hub     atomic.Pointer[hub.Hub]

	mu      sync.Mutex
	rev     uint64
	recs    map[string]hub.SharedRecord
	revs    map[string]uint64
	changes chan change
}

type change struct {
	rec hub.SharedRecord
	rev uint64
}

func newMemShared(t *testing.T, token string) *memShared {
	m := &memShared{token: token, recs: map[string]hub.SharedRecord{}, revs: map[string]uint64{}, changes: make(chan change, 100)}
	done := make(chan struct{})
	go func() { // the watch: owned by the test, ended with it
		defer close(done)
		for c := range m.changes {
			m.hub.Load().Apply(m.token, c.rec, c.rev)
		}
	}()
	t.Cleanup(func() { close(m.changes); <-done })
	return m
}

func (m *memShared) saveLocked(rec hub.SharedRecord) uint64 {
	m.rev++
	m.recs[rec.Room+"/"+rec.ID], m.revs[rec.Room+"/"+rec.ID] = rec, m.rev
	m.changes <- change{rec, m.rev}
	return m.rev
}

func (m *memShared) Create(_ context.Context, rec hub.SharedRecord) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.recs[rec.Room+"/"+rec.ID]; ok {
		return 0, hub.ErrRecordExists
	}
	return m.saveLocked(rec), nil
}

func (m *memShared) Get(_ context.Context, room, id string) (hub.SharedRecord, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, ok := m.recs[room+"/"+id]
	if !ok {
		return rec, 0, errors.New("no such record")
	}
	return rec, m.revs[room+"/"+id], nil
}

func (m *memShared) Update(_ context.Context, rec hub.SharedRecord, rev uint64) (uint64, error) {
	if m.fail.Load() {
		m.refused.Add(1)
		return 0, syscall.ENOSPC
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.revs[rec.Room+"/"+rec.ID] != rev {
		return 0, hub.ErrRecordChanged
	}
	return m.saveLocked(rec), nil
}

func (m *memShared) Epoch() string { return "mem" }

// signedPost posts body to url signed with secret at ts.
func signedPost(t *testing.T, url, secret string, ts int64, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set(TimestampHeader, strconv.FormatInt(ts, 10))
	req.Header.Set(SignatureHeader, sign(secret, ts, []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 512)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return resp.StatusCode, b.String()
}

// TestWebhookAnswerNotSavedCanBeSentAgain: a signed answer the server
// could not save (503) is not taken, so the same signed request sent
// again, as a sender does after a 5xx, is not refused as a replay.
func TestWebhookAnswerNotSavedCanBeSentAgain(t *testing.T) {
	shared := newMemShared(t, tokA)
	h := hub.New(hub.Options{Shared: shared})
	shared.hub.Store(h)
	t.Cleanup(h.Close)
	hook := &Webhook{ID: "n8n", Secret: "s3cret-s3cret-s3cret", Token: tokA}
	srv := httptest.NewServer(hook.Answers(h))
	t.Cleanup(srv.Close)
	asked := make(chan error, 1)
	go func() {
		_, err := h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?", Timeout: time.Hour})
		asked <- err
	}()
	eventually(t, "the question shown", func() bool { return h.Validity(tokA, []string{"q-1"})["q-1"] })

	shared.fail.Store(true)
	body, ts := `{"id":"q-1","text":"Ship it."}`, time.Now().Unix()
	if code, msg := signedPost(t, srv.URL, hook.Secret, ts, body); code != http.StatusServiceUnavailable {
		t.Fatalf("an answer the store refuses: %d %s", code, msg)
	}
	shared.fail.Store(false)
	code, msg := signedPost(t, srv.URL, hook.Secret, ts, body)
	if code == http.StatusConflict {
		t.Fatalf("the same signed answer after a 503: %d %s", code, msg)
	}
	if code != http.StatusOK {
		t.Fatalf("the same signed answer, saved this time: %d %s", code, msg)
	}
	if code, msg := signedPost(t, srv.URL, hook.Secret, ts, body); code != http.StatusConflict {
		t.Errorf("the same signed answer once taken: %d %s, want 409", code, msg)
	}
}

// TestWebhookAnswerHasOneMeaning: a signed answer whose JSON could be
// read two ways (a key given twice, a key in another case, which Go's
// decoder takes for the field) or whose kind is none of the two is
// refused with 400, and answers nothing; its sender may send it again,
// mended.
func TestWebhookAnswerHasOneMeaning(t *testing.T) {
	hook := &Webhook{ID: "n8n", Secret: "s3cret-s3cret-s3cret", Token: tokA}
	f := newFixture(t, map[string][]Channel{tokA: {hook}}, Options{})
	answered := f.ask(tokA, "q-1")
	eventually(t, "the question shown", func() bool { return f.hub.Validity(tokA, []string{"q-1"})["q-1"] })
	url, ts := f.public.URL+"/channels/webhook/n8n/answer", time.Now().Unix()
	for _, body := range []string{
		`{"id":"q-1","text":"No","text":"Yes"}`,
		`{"id":"q-1","TEXT":"Yes"}`,
		`{"id":"q-1","text":"Yes","kind":"Question"}`,
		`{"id":"q-1","text":"Yes","kind":"reprot"}`,
		`{"id":"q-1","text":"Yes"} {"id":"q-1","text":"No"}`,
	} {
		if code, msg := signedPost(t, url, hook.Secret, ts, body); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", body, code, msg)
		}
	}
	if !f.hub.Validity(tokA, []string{"q-1"})["q-1"] {
		t.Fatal("a refused answer answered the question")
	}
	if code, msg := signedPost(t, url, hook.Secret, ts, `{"id":"q-1","text":"Yes","kind":"question"}`); code != http.StatusOK {
		t.Fatalf("the answer: %d %s", code, msg)
	}
	if rep := answer(t, answered); rep.Contents[0].GetText().GetText() != "Yes" {
		t.Fatalf("the agent got %+v", rep)
	}
}

// TestWebhookOfSeveralTokens: a webhook serving several tokens is one
// webhook per token under one ID (the config's tokens), and the server
// takes signed answers at that ID's one address: they answer the
// questions of each of its tokens, of no other.
func TestWebhookOfSeveralTokens(t *testing.T) {
	recv := newReceiver(t)
	const secret = "s3cret-s3cret-s3cret"
	hookA := &Webhook{ID: "n8n", URL: recv.URL, Secret: secret, Token: tokA}
	hookB := &Webhook{ID: "n8n", URL: recv.URL, Secret: secret, Token: tokB}
	const tokC = "token-c-0123456789abcdef"
	hookC := &Webhook{ID: "other", URL: recv.URL, Secret: secret, Token: tokC}
	f := newFixture(t, map[string][]Channel{tokA: {hookA}, tokB: {hookB}, tokC: {hookC}}, Options{})
	url := f.public.URL + "/channels/webhook/n8n/answer"
	ofB := f.ask(tokB, "q-b")
	f.ask(tokC, "q-c")
	recv.waitFor(t, 2)
	if code, msg := signedPost(t, url, secret, time.Now().Unix(), `{"id":"q-b","text":"Ship it."}`); code != http.StatusOK {
		t.Fatalf("an answer to the second token's question: %d %s", code, msg)
	}
	if rep := answer(t, ofB); rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
	ofA := f.ask(tokA, "q-a")
	recv.waitFor(t, 4)
	if code, msg := signedPost(t, url, secret, time.Now().Unix(), `{"id":"q-a","text":"Wait."}`); code != http.StatusOK {
		t.Fatalf("an answer to the first token's question: %d %s", code, msg)
	}
	if rep := answer(t, ofA); rep.Contents[0].GetText().GetText() != "Wait." {
		t.Fatalf("the agent got %+v", rep)
	}
	if code, msg := signedPost(t, url, secret, time.Now().Unix(), `{"id":"q-c","text":"Hijacked."}`); code != http.StatusConflict {
		t.Errorf("an answer at n8n to a question of webhook other's token: %d %s, want 409", code, msg)
	}

	// One ID pending under both tokens names no one question.
	f.ask(tokA, "q-same")
	f.ask(tokB, "q-same")
	eventually(t, "both shown", func() bool {
		return f.hub.Validity(tokA, []string{"q-same"})["q-same"] && f.hub.Validity(tokB, []string{"q-same"})["q-same"]
	})
	if code, msg := signedPost(t, url, secret, time.Now().Unix(), `{"id":"q-same","text":"Which?"}`); code != http.StatusConflict ||
		!strings.Contains(msg, "more than one token") {
		t.Errorf("an answer to an ID pending under both tokens: %d %s, want 409", code, msg)
	}
	if !f.hub.Validity(tokA, []string{"q-same"})["q-same"] || !f.hub.Validity(tokB, []string{"q-same"})["q-same"] {
		t.Error("an ambiguous answer answered a question")
	}
}

// TestWebhookRefusalsLogged: an answer the webhook refuses (a signature
// that does not verify, a stale timestamp, a body of the wrong shape, an
// answer the question does not take, a question no longer pending) is
// told in the log with its status and reason, never with the secret,
// the signature or the body; a flood of them is told a bounded number
// of times a minute, then how many were not told.
func TestWebhookRefusalsLogged(t *testing.T) {
	var clock atomic.Pointer[time.Time]
	start := time.Now()
	clock.Store(&start)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	const secret = "s3cret-s3cret-s3cret"
	hook := &Webhook{ID: "n8n", Secret: secret, Token: tokA, Now: func() time.Time { return *clock.Load() },
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	h := hub.New(hub.Options{})
	t.Cleanup(h.Close)
	srv := httptest.NewServer(hook.Answers(h))
	t.Cleanup(srv.Close)
	go func() { // the agent's call, ended by Close
		_, _ = h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?", Timeout: time.Hour,
			Questions: []*pb.Question{{Options: []*pb.Option{{Label: "Yes"}, {Label: "No"}}}}})
	}()
	eventually(t, "the question shown", func() bool { return h.Validity(tokA, []string{"q-1"})["q-1"] })

	ts := start.Unix()
	for _, c := range []struct {
		secret string
		ts     int64
		body   string
		code   int
		reason string
	}{
		{"wrong-wrong-wrong-wrong", ts, `{"id":"q-1","text":"Body-text-1"}`, http.StatusUnauthorized, "the signature does not verify"},
		{secret, ts - 600, `{"id":"q-1","text":"Body-text-2"}`, http.StatusUnauthorized, "the timestamp is 600 s from the server's clock"},
		{secret, ts, `{"id":"q-1","Body-text-3":"Yes"}`, http.StatusBadRequest, "not one JSON object"},
		{secret, ts, `{"id":"q-1","text":"Body-text-4"}`, http.StatusBadRequest, "takes only its options"},
		{secret, ts, `{"id":"q-none","text":"Body-text-5"}`, http.StatusConflict, "no longer pending"},
	} {
		if code, msg := signedPost(t, srv.URL, c.secret, c.ts, c.body); code != c.code {
			t.Fatalf("%s: %d %s, want %d", c.body, code, msg, c.code)
		}
		logs.waitFor(t, c.reason)
	}
	got := logs.String()
	if n := strings.Count(got, "webhook: an answer refused"); n != 5 {
		t.Errorf("%d refusals told, want 5:\n%s", n, got)
	}
	for _, leak := range []string{secret, "wrong-wrong", "v1=", "Body-text"} {
		if strings.Contains(got, leak) {
			t.Errorf("the log shows %q:\n%s", leak, got)
		}
	}

	// A flood: told maxRefusalLogs times a minute in all.
	for range 100 {
		if code, _ := signedPost(t, srv.URL, "wrong-wrong-wrong-wrong", ts, `{}`); code != http.StatusUnauthorized {
			t.Fatalf("a wrong signature: %d", code)
		}
	}
	if n := strings.Count(logs.String(), "webhook: an answer refused"); n != maxRefusalLogs {
		t.Errorf("%d refusals told of 105 in a minute, want %d", n, maxRefusalLogs)
	}
	later := start.Add(time.Minute)
	clock.Store(&later)
	signedPost(t, srv.URL, "wrong-wrong-wrong-wrong", later.Unix(), `{}`)
	logs.waitFor(t, "untold=95")
}
