package mcphttp

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/mcpbridge"
)

// TestResumeThroughAnotherInstance: a call's stream cut while the
// question is with the person is resumed through another instance of the
// cluster, which re-attaches to the question (the call where it began no
// longer waits on it) and gives the person's answer as the call's
// response; its events are its own, so the client resumes there next.
func TestResumeThroughAnotherInstance(t *testing.T) {
	be := newAsker()
	_, bases, _ := newInstances(t, 2, 4, func(string) mcpbridge.Backend { return be })
	sid := dial(t, bases[0], "token-a", "").GetSessionId()
	last := askAndCutSigned(t, be, bases[0], sid, true)
	// The call where it began stops waiting on the question once its
	// client is gone.
	be.await(func() bool { return be.waiting[be.ids[0]] == 0 })

	req := mcpRequest(t, http.MethodGet, bases[1]+"?t=token-a", sid, "")
	req.Header.Set("Last-Event-ID", last)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("a resume through another instance: %d %s", resp.StatusCode, b)
	}
	r := bufio.NewReader(resp.Body)
	first, err := next(r)
	if err != nil {
		t.Fatal(err)
	}
	tag, _, _, _ := parseEventID(last)
	if ftag, _, sig, err := parseEventID(first.id); err != nil || ftag == tag || sig == "" || first.data != "" {
		t.Fatalf("the resumed stream's first event %+v: want an ID of this instance's, carrying the request, and no data", first)
	}
	be.await(func() bool { return be.waiting[be.ids[0]] == 1 })
	be.answer(0, "go ahead")
	for {
		ev, err := next(r)
		if err != nil {
			t.Fatalf("the resumed stream ended without the call's response: %v", err)
		}
		if ev.data == "" {
			continue
		}
		if !strings.Contains(ev.data, `"id":7`) || !strings.Contains(ev.data, "go ahead") || strings.Contains(ev.data, `"isError":true`) {
			t.Fatalf("the call's response: %s", ev.data)
		}
		break
	}
	if ev, err := next(r); !errors.Is(err, io.EOF) {
		t.Errorf("after the response the stream goes on: %+v %v", ev, err)
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if len(be.ids) != 1 {
		t.Errorf("the person was asked %d times", len(be.ids))
	}
}

// TestEventIDsCarryTheRequest: in a cluster the event IDs of a call
// that asks carry its request (ID, kind, digest, timeout) and the call's
// JSON-RPC id, signed for its session and room; alone, an instance's
// event IDs carry nothing of the kind (TestResumeRefusals).
func TestEventIDsCarryTheRequest(t *testing.T) {
	be := newAsker()
	_, bases, _ := newInstances(t, 2, 4, func(string) mcpbridge.Backend { return be })
	sid := dial(t, bases[0], "token-a", "").GetSessionId()
	last := askAndCutSigned(t, be, bases[0], sid, true)
	_, _, sig, err := parseEventID(last)
	if err != nil {
		t.Fatal(err)
	}
	key := deriveKey(sharedKey, eventIDLabel)
	c, err := eventSigner{key: key, token: "token-a", sid: sid}.verify(sig)
	if err != nil {
		t.Fatalf("the event ID's signature: %v", err)
	}
	be.mu.Lock()
	asked := be.ids[0]
	be.mu.Unlock()
	if c.Request != asked || c.Kind != wire.AskQuestion || c.sum() != wire.Digest(wire.AskQuestion, "/p", "Deploy now?") ||
		string(c.Call) != "7" || c.Timeout != 600 {
		t.Errorf("the event ID carries %+v", c)
	}
	for _, other := range []eventSigner{{key: key, token: "token-b", sid: sid}, {key: key, token: "token-a", sid: sid + "x"}, {key: deriveKey(sharedKey, sessionIDLabel), token: "token-a", sid: sid}} {
		if _, err := other.verify(sig); err == nil {
			t.Errorf("the signature holds for %+v", other)
		}
	}
}

// TestResumeElsewhereRefusals: an instance that does not keep an event
// resumes the call only from an ID signed for this session: a forged or
// altered one, one of another session, one that carries no request, or
// one too long replays nothing (400) and re-attaches to nothing; one
// whose request the server does not know gets the call's response saying
// so. The call goes on, and is resumed after all.
func TestResumeElsewhereRefusals(t *testing.T) {
	be := newAsker()
	_, bases, _ := newInstances(t, 2, 4, func(string) mcpbridge.Backend { return be })
	sid := dial(t, bases[0], "token-a", "").GetSessionId()
	other := dial(t, bases[0], "token-a", "").GetSessionId()
	last := askAndCutSigned(t, be, bases[0], sid, true)
	head, sig, _ := strings.Cut(last, ".")
	payload, mac, _ := strings.Cut(sig, ".")
	altered := []byte(payload)
	altered[3] ^= 1
	unknown := eventSigner{key: deriveKey(sharedKey, eventIDLabel), token: "token-a", sid: sid}.sign(callClaims{
		Request: "never-asked", Kind: wire.AskQuestion, Sum: make([]byte, 32), Call: []byte("7")})
	for _, tc := range []struct {
		name, token, sid, id string
		want                 int
		says                 string
	}{
		{"altered claims", "token-a", sid, head + "." + string(altered) + "." + mac, http.StatusBadRequest, "not an event of this MCP session"},
		{"no signature", "token-a", sid, head + "." + payload, http.StatusBadRequest, "not an event of this MCP session"},
		{"empty signed part", "token-a", sid, head + ".", http.StatusBadRequest, "not an event ID this server gives"},
		{"another session", "token-a", other, last, http.StatusBadRequest, "not an event of this MCP session"},
		{"another token", "token-b", sid, last, http.StatusNotFound, "unknown MCP session"},
		{"no request", "token-a", sid, head, http.StatusBadRequest, "resumed only through the instance that serves it"},
		{"too long", "token-a", sid, last + strings.Repeat("A", maxEventID), http.StatusBadRequest, "not an event ID this server gives"},
	} {
		req := mcpRequest(t, http.MethodGet, bases[1]+"?t="+tc.token, tc.sid, "")
		req.Header.Set("Last-Event-ID", tc.id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, resp.StatusCode, body, tc.want, tc.says)
		}
	}
	if got := resume(t, bases[1], sid, head+"."+unknown); !strings.Contains(got, "no longer knows the question") {
		t.Errorf("a request the server does not know: %q", got)
	}
	be.mu.Lock()
	if len(be.ids) != 1 || be.waiting[be.ids[0]] != 0 {
		t.Errorf("asked %v, waiting %v: a refused resume re-attached", be.ids, be.waiting)
	}
	be.mu.Unlock()
	be.answer(0, "go ahead")
	if got := resume(t, bases[1], sid, last); !strings.Contains(got, "go ahead") {
		t.Errorf("the call resumed after the refusals: %q", got)
	}
}

// TestResumedOnceHere: a call resumed through an instance, cut there
// before its client had more than the stream's first event, and resumed
// there again from the ID of the instance where it began, is one call
// stream there, waiting on its request once; the second resume carries
// it and has the response.
func TestResumedOnceHere(t *testing.T) {
	be := newAsker()
	hs, bases, _ := newInstances(t, 2, 4, func(string) mcpbridge.Backend { return be })
	sid := dial(t, bases[0], "token-a", "").GetSessionId()
	last := askAndCutSigned(t, be, bases[0], sid, true)
	be.await(func() bool { return be.waiting[be.ids[0]] == 0 })

	get := func(c *http.Client) *http.Response {
		req := mcpRequest(t, http.MethodGet, bases[1]+"?t=token-a", sid, "")
		req.Header.Set("Last-Event-ID", last)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("resume: %d", resp.StatusCode)
		}
		return resp
	}
	cut := newCutter()
	if _, err := next(bufio.NewReader(get(cut.Client).Body)); err != nil {
		t.Fatal(err)
	}
	be.await(func() bool { return be.waiting[be.ids[0]] == 1 })
	cut.cut()
	be.await(func() bool { return be.waiting[be.ids[0]] == 0 })
	second := get(http.DefaultClient)
	be.await(func() bool { return be.waiting[be.ids[0]] == 1 })
	if n := hs[1].callsOf("token-a", sid); n != 1 {
		t.Errorf("%d call streams of the session, want 1", n)
	}
	be.answer(0, "go ahead")
	body, err := io.ReadAll(second.Body)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(body), `"id":7`); n != 1 || !strings.Contains(string(body), "go ahead") {
		t.Fatalf("the second resume: %s", body)
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if len(be.ids) != 1 {
		t.Errorf("asked %d times", len(be.ids))
	}
}

// callsOf is how many call streams not yet done the session sid of
// token has here.
func (h *Handler) callsOf(token, sid string) int {
	h.mu.Lock()
	rm := h.rooms[sha256.Sum256([]byte(token))]
	var l *eventLog
	if s, _ := rm.sessions.Get(sid); s != nil {
		l = s.log
	}
	h.mu.Unlock()
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.streams)
}

// TestResumeHerePastItsEvents: an instance that no longer keeps its own
// event (the session's later events took its place) resumes the call
// from the request the ID carries, as another instance would, rather
// than refuse it.
func TestResumeHerePastItsEvents(t *testing.T) {
	be := newAsker()
	_, bases, _ := newInstancesWith(t, 1, Options{Backend: func(string) mcpbridge.Backend { return be },
		Replay: ReplayLimits{Events: 1}})
	sid := dial(t, bases[0], "token-a", "").GetSessionId()
	last := askAndCutSigned(t, be, bases[0], sid, true)
	be.await(func() bool { return be.waiting[be.ids[0]] == 0 })
	// Another call of the session: its first event is the one kept now.
	resp, err := http.DefaultClient.Do(mcpRequest(t, http.MethodPost, bases[0]+"?t=token-a", sid,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"And then?","project_directory":"/p"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := next(bufio.NewReader(resp.Body)); err != nil {
		t.Fatal(err)
	}
	req := mcpRequest(t, http.MethodGet, bases[0]+"?t=token-a", sid, "")
	req.Header.Set("Last-Event-ID", last)
	resumed, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Body.Close()
	if resumed.StatusCode != http.StatusOK {
		t.Fatalf("resume: %d", resumed.StatusCode)
	}
	be.await(func() bool { return be.waiting[be.ids[0]] == 1 })
	be.answer(0, "go ahead")
	body, err := io.ReadAll(resumed.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"id":7`) || !strings.Contains(string(body), "go ahead") {
		t.Errorf("the resumed call's response: %s", body)
	}
}
