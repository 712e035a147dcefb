package mcphttp

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// formAsker is an asker whose form answers (AskQuestionReply) the test
// reads, in the order they come.
type formAsker struct {
	*asker
	replied chan string
}

func (f formAsker) AskQuestionReply(_ context.Context, r *pb.AskQuestionReplyRequest) error {
	var text []string
	for _, c := range r.GetResponse().GetContents() {
		text = append(text, c.GetText().GetText())
	}
	f.replied <- strings.Join(text, "\n")
	return nil
}

// signRelay is m as an instance of the cluster of key sends it, for the
// room of token.
func signRelay(key []byte, token string, m relayMsg) []byte {
	room := sha256.Sum256([]byte(token))
	m.Room = hex.EncodeToString(room[:])
	m.MAC = m.sum(deriveKey(key, relayLabel))
	b, _ := json.Marshal(m)
	return b
}

// initializeWithForms opens a session at base whose client shows forms.
func initializeWithForms(t *testing.T, base, token string) string {
	t.Helper()
	req := mcpRequest(t, http.MethodPost, base+"?t="+token, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"forms","version":"1"}}}`)
	req.Header.Del("Mcp-Session-Id")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %d, no session", resp.StatusCode)
	}
	resp, err = http.DefaultClient.Do(mcpRequest(t, http.MethodPost, base+"?t="+token, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	return sid
}

// TestRelayRefusesForgeries: a call shows its form on one instance (A),
// its stream is cut and resumed through another (B). Messages that are
// not what an instance of the cluster sent for this session, or that
// name what the session does not have, act on nothing: A relays
// nothing and its call is not taken as carried, B's resumed stream gets
// no event, the form is not answered. Each is given to both instances
// as if heard on the subject; then the genuine message of each kind
// acts, so a forgery taken would show before it.
func TestRelayRefusesForgeries(t *testing.T) {
	be := formAsker{newAsker(), make(chan string, 4)}
	rb, bases := newRelayPeers(t, 2, be)
	hA, hB := rb.hs[0], rb.hs[1]
	rb.mu.Lock()
	rb.forged = func([]byte) []byte { return nil } // the test alone speaks on the subject
	rb.mu.Unlock()

	sid := initializeWithForms(t, bases[0], "token-a")
	other := initializeWithForms(t, bases[0], "token-b")
	c := newCutter()
	resp, err := c.Do(mcpRequest(t, http.MethodPost, bases[0]+"?t=token-a", sid, askBody))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	var form json.RawMessage
	last := ""
	for form == nil || !strings.Contains(last, ".") {
		ev, err := next(br)
		if err != nil {
			t.Fatalf("the call's stream: %v", err)
		}
		if ev.id != "" {
			last = ev.id
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal([]byte(ev.data), &m) == nil && m.Method == "elicitation/create" {
			form = m.ID
		}
	}
	c.cut()
	be.await(func() bool { return be.waiting[be.ids[0]] == 0 })
	q := be.ids[0]
	tag, n, _, _ := parseEventID(last)

	req := mcpRequest(t, http.MethodGet, bases[1]+"?t=token-a", sid, "")
	req.Header.Set("Last-Event-ID", last)
	resumed, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Body.Close()
	ch := events(resumed.Body)
	awaitEvent(t, ch, func(sse) bool { return true })
	be.await(func() bool { return be.waiting[q] == 1 })

	progress := func(what string) json.RawMessage {
		return json.RawMessage(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p7","progress":1,"message":"` + what + `"}}`)
	}
	// The form's ID names the log of its instance and its number there
	// (formids.go): an answer relayed names that log, and the number.
	ftag, fn, ok := parseFormID(form)
	if !ok || ftag != tag {
		t.Fatalf("the form's ID %s does not name its instance's log %s", form, tag)
	}
	form = json.RawMessage(strconv.FormatInt(fn, 10))
	answer := func(what string) json.RawMessage {
		return json.RawMessage(`{"jsonrpc":"2.0","id":` + string(form) + `,"result":{"action":"accept","content":{"answer":"` + what + `"}}}`)
	}
	carry := relayMsg{Kind: relayCarry, Session: sid, Request: q, Tag: tag, N: n}
	event := relayMsg{Kind: relayEvent, Session: sid, Request: q, Tag: tag, N: n + 100, Data: progress("forged")}
	reply := relayMsg{Kind: relayReply, Session: sid, Tag: ftag, Data: answer("forged")}
	huge := strings.Repeat("x", maxRelay)

	var forgeries []struct {
		name string
		msg  []byte
	}
	add := func(name string, b []byte) {
		forgeries = append(forgeries, struct {
			name string
			msg  []byte
		}{name, b})
	}
	for _, m := range []relayMsg{carry, event, reply} {
		k := m.Kind
		good := signRelay(sharedKey, "token-a", m)
		altered := []byte(strings.Replace(string(good), `"m":"`, `"m":"A`, 1))
		add(k+": altered signature", altered)
		add(k+": no signature", []byte(strings.Replace(string(good), `"m":"`, `"x":"`, 1)))
		add(k+": another cluster's key", signRelay([]byte("another cluster's key, 32 bytes!"), "token-a", m))
		add(k+": truncated", good[:len(good)-3])
		add(k+": not JSON", []byte(strings.Repeat("{", 10)))
		for _, f := range []func(*relayMsg){
			func(r *relayMsg) { r.N++ },
			func(r *relayMsg) { r.Tag += "x" },
			func(r *relayMsg) { r.Request += "x" },
			func(r *relayMsg) {
				if r.Kind = relayReply; m.Kind == relayReply {
					r.Kind = relayEvent
				}
			},
		} {
			var r relayMsg
			_ = json.Unmarshal(good, &r)
			f(&r)
			b, _ := json.Marshal(r)
			add(k+": a field altered after signing", b)
		}
		add(k+": another room's digest", signRelay(sharedKey, "token-b", m))
		o := m
		o.Session = other
		add(k+": a session signed for another room", signRelay(sharedKey, "token-a", o))
		add(k+": another room's session, in its room", signRelay(sharedKey, "token-b", o))
		o = m
		o.Session = sid + "x"
		add(k+": a session no instance signed", signRelay(sharedKey, "token-a", o))
		o = m
		o.Data = json.RawMessage(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"pad":"` + huge + `"}}`)
		if k == relayReply {
			o.Data = json.RawMessage(`{"jsonrpc":"2.0","id":` + string(form) + `,"result":{"action":"accept","content":{"answer":"forged","pad":"` + huge + `"}}}`)
		}
		add(k+": over maxRelay", signRelay(sharedKey, "token-a", o))
	}
	o := event
	o.Request = "another-request"
	add("event: for a request the session does not have", signRelay(sharedKey, "token-a", o))
	o = carry
	o.Request = "another-request"
	add("carry: for a request the session does not have", signRelay(sharedKey, "token-a", o))
	o = carry
	o.N = 1 << 62
	add("carry: an event the origin never gave", signRelay(sharedKey, "token-a", o))

	stA := hA.streamOf(t, "token-a", sid, q)
	for _, f := range forgeries {
		hA.received(f.msg)
		hB.received(f.msg)
		<-stA.in.quiet() // a carry is taken on the stream's own goroutine
		rb.mu.Lock()
		sent := rb.sent[0]
		rb.mu.Unlock()
		if up, _ := stA.State(); up || sent != 0 {
			t.Fatalf("%s: the call where it began is carried (%v), relayed %d messages", f.name, up, sent)
		}
		select {
		case got := <-be.replied:
			t.Fatalf("%s: the form was answered with %q", f.name, got)
		default:
		}
	}

	// What an instance sends acts: the first event the resumed stream
	// gets is the genuine one, and the form's answer is the genuine one.
	event.Data = progress("genuine")
	hB.received(signRelay(sharedKey, "token-a", event))
	ev := awaitEvent(t, ch, func(ev sse) bool { return ev.data != "" })
	if !strings.Contains(ev.data, "genuine") {
		t.Fatalf("the resumed stream's first event: %s", ev.data)
	}
	hA.received(signRelay(sharedKey, "token-a", carry))
	<-stA.in.quiet()
	if up, _ := stA.State(); !up {
		t.Fatal("the genuine carry is not taken")
	}
	reply.Data = answer("genuine")
	hA.received(signRelay(sharedKey, "token-a", reply))
	if got := <-be.replied; got != "genuine" {
		t.Fatalf("the form was answered with %q", got)
	}
}

// streamOf is the stream, here, of the call of session sid that asked
// request q.
func (h *Handler) streamOf(t *testing.T, token, sid, q string) *callStream {
	t.Helper()
	h.mu.Lock()
	rm := h.rooms[sha256.Sum256([]byte(token))]
	var l *eventLog
	if rm != nil {
		if s, ok := rm.sessions.Get(sid); ok {
			l = s.log
		}
	}
	h.mu.Unlock()
	st := l.asking(q)
	if st == nil {
		t.Fatalf("no call of session %s asked %s here", sid, q)
	}
	return st
}

// quiet is closed once nothing waits in in and no goroutine acts on it.
func (in *inbox) quiet() <-chan struct{} {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.running {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return in.idle
}
