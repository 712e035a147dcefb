package mcphttp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/mcpbridge"
)

// relayBus stands for the cluster's subjects, notes and relayed events
// alike: what one member sends every other hears, before Send returns.
type relayBus struct {
	notes  *bus
	hs     []*Handler
	mu     sync.Mutex
	hears  map[int]func([]byte)
	forged func([]byte) []byte // when set, what the bus carries instead (nil: nothing)
	sent   map[int]int         // how many messages each member sent
}

type relayMember struct {
	member
	r *relayBus
}

func (m relayMember) Send(msg []byte) {
	m.r.mu.Lock()
	var hs []func([]byte)
	for j, h := range m.r.hears {
		if j != m.i {
			hs = append(hs, h)
		}
	}
	forge := m.r.forged
	m.r.sent[m.i]++
	m.r.mu.Unlock()
	if forge != nil {
		if msg = forge(msg); msg == nil {
			return
		}
	}
	for _, h := range hs {
		h(msg)
	}
}

func (m relayMember) Receive(hear func([]byte)) (func(), error) {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	m.r.hears[m.i] = hear
	return func() {
		m.r.mu.Lock()
		defer m.r.mu.Unlock()
		delete(m.r.hears, m.i)
	}, nil
}

// Run and Gone are Origins: a member is there while it hears the relayed
// events (its Handler not closed).
func (m relayMember) Run() string { return "run-" + strconv.Itoa(m.i) }

func (m relayMember) Gone(_ context.Context, run string) bool {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	for i := range m.r.hs {
		if run == "run-"+strconv.Itoa(i) {
			_, there := m.r.hears[i]
			return !there
		}
	}
	return false
}

// newRelayPeers serves n Handlers that share a key, tell each other of
// their sessions and relay their calls' events; progress every few
// milliseconds.
func newRelayPeers(t *testing.T, n int, be mcpbridge.Backend) (*relayBus, []string) {
	return newRelayPeersWith(t, n, be, Options{Bridge: mcpbridge.Options{ProgressInterval: 5 * time.Millisecond}})
}

// newRelayPeersWith is newRelayPeers with o's Replay and Bridge.
func newRelayPeersWith(t *testing.T, n int, be mcpbridge.Backend, o Options) (*relayBus, []string) {
	t.Helper()
	rb := &relayBus{notes: &bus{hears: map[int]func([]byte){}}, hears: map[int]func([]byte){}, sent: map[int]int{}}
	var bases []string
	for i := range n {
		h := New(Options{MaxSessions: 4, Backend: func(string) mcpbridge.Backend { return be }, SessionKey: sharedKey,
			TokenOf: func(r *http.Request) string { return r.URL.Query().Get("t") },
			Peers:   relayMember{member{rb.notes, i}, rb},
			Replay:  o.Replay,
			Bridge:  o.Bridge,
			Logger:  o.Logger})
		ts := httptest.NewServer(h)
		t.Cleanup(func() {
			h.Close()
			ts.Close()
		})
		rb.hs, bases = append(rb.hs, h), append(bases, ts.URL)
	}
	return rb, bases
}

// events reads r's events onto a channel until it ends.
func events(r io.Reader) <-chan sse {
	ch := make(chan sse, 64)
	go func() {
		defer close(ch)
		br := bufio.NewReader(r)
		for {
			ev, err := next(br)
			if err != nil {
				if !errors.Is(err, io.EOF) {
					ch <- sse{data: "error: " + err.Error()}
				}
				return
			}
			ch <- ev
		}
	}()
	return ch
}

// awaitEvent is the next event of ch that match takes; it fails the
// test when ch ends first, or when none comes for long.
func awaitEvent(t *testing.T, ch <-chan sse, match func(sse) bool) sse {
	t.Helper()
	guard := time.NewTimer(20 * time.Second) // a hang, not a measure
	defer guard.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("the stream ended")
			}
			if match(ev) {
				return ev
			}
		case <-guard.C:
			t.Fatal("no such event on the stream")
		}
	}
}

// TestProgressOnStreamResumedElsewhere: a call asks on one instance,
// its stream is cut and resumed through another. The call where it
// began goes on as its client's (it waits on the question again), its
// progress notifications come on the resumed stream, and the person's
// answer comes there once, as the call's response; the stream then
// ends.
func TestProgressOnStreamResumedElsewhere(t *testing.T) {
	be := newAsker()
	_, bases := newRelayPeers(t, 2, be)
	sid := dial(t, bases[0], "token-a", "").GetSessionId()
	last := askAndCutSigned(t, be, bases[0], sid, true)
	be.await(func() bool { return be.waiting[be.ids[0]] == 0 })

	req := mcpRequest(t, http.MethodGet, bases[1]+"?t=token-a", sid, "")
	req.Header.Set("Last-Event-ID", last)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resume: %d", resp.StatusCode)
	}
	ch := events(resp.Body)
	tag, _, _, _ := parseEventID(last)
	first := awaitEvent(t, ch, func(sse) bool { return true })
	if ftag, _, _, _ := parseEventID(first.id); ftag == tag {
		t.Fatalf("the resume was served where the call began")
	}
	// The call where it began and the resumed one both wait on it.
	be.await(func() bool { return be.waiting[be.ids[0]] == 2 })
	var seen []string
	for range 2 {
		ev := awaitEvent(t, ch, func(ev sse) bool { return ev.data != "" })
		if !strings.Contains(ev.data, `"method":"notifications/progress"`) || !strings.Contains(ev.data, `"progressToken":"p7"`) {
			t.Fatalf("an event of the resumed stream: %s", ev.data)
		}
		if ftag, _, _, _ := parseEventID(ev.id); ftag == tag || ev.id == "" {
			t.Fatalf("a relayed event's ID %q is not the resumed stream's", ev.id)
		}
		seen = append(seen, ev.id)
	}
	if seen[0] == seen[1] {
		t.Fatalf("an event came twice: %v", seen)
	}
	be.answer(0, "go ahead")
	responses := 0
	for ev := range ch {
		switch {
		case strings.HasPrefix(ev.data, "error"):
			t.Fatal(ev.data)
		case strings.Contains(ev.data, `"id":7`):
			responses++
			if !strings.Contains(ev.data, "go ahead") || strings.Contains(ev.data, `"isError":true`) {
				t.Errorf("the call's response: %s", ev.data)
			}
		}
	}
	if responses != 1 {
		t.Fatalf("the call's response came %d times", responses)
	}
}
