package mcphttp

import (
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/mcpbridge"
)

// A resumed stream whose outcome came waits for the response of the
// call where it began only while that call's instance is there: once it
// is known gone (killed), nothing more comes from it, and the client is
// given the outcome at once. Under synctest the clock moves only when
// every goroutine waits on it, so an outcome given at once is one given
// at the instant the wait began.

const progress4 = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":4}}`

// resumedFrom is a stream of request q1 resumed on h, whose call began
// at the log "origin" (its client has event 3 of it), carried: its
// client's stream, and stop, which ends the carry.
func resumedFrom(t *testing.T, h *Handler) (*callStream, *stallWriter, func()) {
	t.Helper()
	l := newEventLog(h.o.Replay, true)
	st, _ := l.openResumed(func() {}, "q1", json.RawMessage("7"), func() {}, "", eventPos{tag: "origin", n: 3})
	w := newStallWriter()
	st.attachResumed(w)
	stop := sync.OnceFunc(h.carrying("token-a", "sid", "q1", st))
	t.Cleanup(stop)
	return st, w, stop
}

// TestOutcomeAtOnceOriginGone: the call's instance was heard (it
// relayed a progress), then killed; the outcome comes from the record.
// It is given at once, after the progress, not originWait later.
func TestOutcomeAtOnceOriginGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ms := newTimedInstance(t)
		st, w, stop := resumedFrom(t, h)
		st.relayed("origin", 0, nil)
		st.relayed("origin", 4, []byte(progress4))
		ms.kill("run-a")
		stop()
		start := time.Now()
		if h.awaitOrigin(st, "run-a") {
			t.Fatal("the stream ended with no response of the call's instance")
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the outcome waited %v for an instance known gone", waited)
		}
		if out := w.String(); !strings.Contains(out, "notifications/progress") {
			t.Fatalf("the client's stream lost the event it had not seen:\n%s", out)
		}
	})
}

// TestOutcomeAtOnceOriginNeverAnswered: the call's instance was killed
// before its client resumed: it never answers the carry. The outcome,
// come at once, is given at once.
func TestOutcomeAtOnceOriginNeverAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ms := newTimedInstance(t)
		ms.kill("run-a")
		st, _, stop := resumedFrom(t, h)
		stop()
		start := time.Now()
		if h.awaitOrigin(st, "run-a") {
			t.Fatal("the stream ended with no response of the call's instance")
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the outcome waited %v for an instance known gone", waited)
		}
	})
}

// TestOriginAliveStillWaited: the call's instance is there (another
// run is gone): its events and response, relayed a moment after the
// outcome came, come first, once; the outcome is not given.
func TestOriginAliveStillWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ms := newTimedInstance(t)
		ms.kill("run-b")
		st, w, stop := resumedFrom(t, h)
		st.relayed("origin", 0, nil)
		stop()
		done := make(chan bool)
		go func() { done <- h.awaitOrigin(st, "run-a") }()
		time.Sleep(originWait / 2)
		st.relayed("origin", 4, []byte(progress4))
		st.relayed("origin", 5, []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"from the call"}]}}`))
		if !<-done {
			t.Fatal("the call's own response, relayed within originWait, did not end the stream")
		}
		out := w.String()
		p, r := strings.Index(out, "notifications/progress"), strings.Index(out, "from the call")
		if p < 0 || r < 0 || p > r || strings.Count(out, `"id":7`) != 1 {
			t.Fatalf("the client's stream:\n%s", out)
		}
		ms.mu.Lock()
		asked := ms.asked
		ms.mu.Unlock()
		if asked == 0 {
			t.Fatal("whether the call's instance is there was never asked")
		}
	})
}

// logLines is a slog handler's output, safe to read while written.
type logLines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestResumedOriginKilled: a call's event IDs name the run of the
// instance where it began; that instance is gone (closed: it hears no
// relayed events) when its client resumes through another, whose
// outcome, the person's answer, comes once, given without waiting for
// the dead instance.
func TestResumedOriginKilled(t *testing.T) {
	be := newAsker()
	var logs logLines
	rb, bases := newRelayPeersWith(t, 2, be, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Bridge: mcpbridge.Options{ProgressInterval: 5 * time.Millisecond}})
	sid := dial(t, bases[0], "token-a", "").GetSessionId()
	last := askAndCutSigned(t, be, bases[0], sid, true)
	_, _, sig, _ := parseEventID(last)
	c, err := eventSigner{key: deriveKey(sharedKey, eventIDLabel), token: "token-a", sid: sid}.verify(sig)
	if err != nil || c.Run != "run-0" {
		t.Fatalf("the event ID's claims %+v (%v) do not name the run where the call began", c, err)
	}
	rb.hs[0].Close()

	resp := getFrom(t, bases[1], sid, last)
	defer resp.Body.Close()
	ch := events(resp.Body)
	be.await(func() bool { return len(be.ids) == 1 && be.waiting[be.ids[0]] == 1 })
	be.answer(0, "go ahead")
	responses := 0
	for ev := range ch {
		if strings.HasPrefix(ev.data, "error") {
			t.Fatal(ev.data)
		}
		if strings.Contains(ev.data, `"id":7`) {
			responses++
			if !strings.Contains(ev.data, "go ahead") {
				t.Fatalf("the call's response: %s", ev.data)
			}
		}
	}
	if responses != 1 {
		t.Fatalf("the call's response came %d times", responses)
	}
	if !strings.Contains(logs.String(), "is gone: its outcome is given without waiting") {
		t.Fatalf("the outcome waited for the dead instance:\n%s", logs.String())
	}
}

// TestOutcomeAtOnceOriginHere: a call resumed on the instance where it
// began (its client held an ID that instance no longer keeps) hears
// nothing relayed from its own call: its outcome is given at once.
func TestOutcomeAtOnceOriginHere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ms := newTimedInstance(t)
		st, _, stop := resumedFrom(t, h)
		stop()
		start := time.Now()
		if h.awaitOrigin(st, ms.Run()) {
			t.Fatal("the stream ended with no response of the call")
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("the outcome waited %v for this instance's own call", waited)
		}
	})
}
