package mcphttp

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestEventsBeforeOutcome: a call whose stream is resumed through
// another instance ended before the client resumed it (its answer
// given meanwhile), so the resumed stream's own outcome comes at once,
// before the call's instance has answered the carry. The client gets
// that instance's events first (a progress it recorded while the
// client was away, then its response, once), not the outcome alone.
func TestEventsBeforeOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ms := newTimedInstance(t)
		l := newEventLog(h.o.Replay, true)
		st, _ := l.openResumed(func() {}, "q1", json.RawMessage("7"), func() {}, "", eventPos{tag: "origin", n: 3})
		w := newStallWriter()
		st.attachResumed(w)
		stop := sync.OnceFunc(h.carrying("token-a", "sid", "q1", st))
		defer stop()
		if cs := ms.take(relayCarry); len(cs) != 1 {
			t.Fatalf("carries: %+v", cs)
		}

		own := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"from the record"}]}}`)
		done := make(chan struct{})
		go func() { // serveResumed: the outcome came at once
			defer close(done)
			stop()
			if !st.awaitOrigin(nil) {
				st.record(own, true)
			}
		}()
		// The call's instance answers the carry a moment later.
		time.Sleep(50 * time.Millisecond)
		st.relayed("origin", 0, nil)
		st.relayed("origin", 4, []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":4}}`))
		st.relayed("origin", 5, []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"from the call"}]}}`))
		<-done

		out := w.String()
		p, r := strings.Index(out, "notifications/progress"), strings.Index(out, `"id":7`)
		if p < 0 || r < 0 || p > r {
			t.Fatalf("the client's stream, the call's events not before its outcome:\n%s", out)
		}
		if n := strings.Count(out, `"id":7`); n != 1 {
			t.Fatalf("the call's outcome came %d times:\n%s", n, out)
		}
	})
}
