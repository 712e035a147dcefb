package mcphttp

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

// stallWriter is a client's connection: once stalled, a write waits
// until the test lets it through, as a client that does not read does
// until its write deadline.
type stallWriter struct {
	h       http.Header
	mu      sync.Mutex
	release chan struct{} // nil: writes go through
	buf     bytes.Buffer
}

func newStallWriter() *stallWriter { return &stallWriter{h: http.Header{}} }

func (w *stallWriter) Header() http.Header { return w.h }
func (w *stallWriter) WriteHeader(int)     {}
func (w *stallWriter) Flush()              {}

func (w *stallWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	release := w.release
	w.mu.Unlock()
	if release != nil {
		<-release
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// stall makes writes wait until the function it returns is called.
func (w *stallWriter) stall() (release func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	w.release = ch
	return sync.OnceFunc(func() {
		w.mu.Lock()
		w.release = nil
		w.mu.Unlock()
		close(ch)
	})
}

func (w *stallWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// progressEvents counts the relayed progress events written.
func (w *stallWriter) progressEvents() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Count(w.buf.String(), "notifications/progress")
}

// resumedHere is a session of token on h whose client resumed here the
// stream of request req, made through another instance, on w.
func resumedHere(t *testing.T, h *Handler, token, req string, w http.ResponseWriter) (sid string, st *callStream) {
	t.Helper()
	sid = sign(h.key, token, claims{Relay: DefaultRelaySession, Nonce: req})
	l := newEventLog(h.o.Replay, true)
	st, _ = l.openResumed(func() {}, req, json.RawMessage("7"), func() {}, "", eventPos{})
	st.attachResumed(w)
	digest := sha256.Sum256([]byte(token))
	h.mu.Lock()
	defer h.mu.Unlock()
	rm := h.rooms[digest]
	if rm == nil {
		rm = &room{key: digest, token: token, bridges: make(map[string]*bridge)}
		h.rooms[digest] = rm
	}
	rm.sessions.Put(sid, &session{id: sid, log: l})
	return sid, st
}

func relayedProgress(sid, req string, n uint64) relayMsg {
	return relayMsg{Kind: relayEvent, Session: sid, Request: req, Tag: "origin", N: n,
		Data: json.RawMessage(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":` + strconv.FormatUint(n, 10) + `}}`)}
}

// TestStalledClientHoldsUpNoOtherStream: two clients resumed here the
// streams of calls made elsewhere; one stops reading. The events relayed
// for both come, in one goroutine, as the cluster's subscription hands
// them: the other client gets its events at once, the goroutine never
// waits on the stalled client, and what waits for that client is
// bounded. Once it reads again it gets what was kept, in order; Close
// waits for the goroutine that writes to it.
func TestStalledClientHoldsUpNoOtherStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, _ := newTimedInstance(t)
		slow, fast := newStallWriter(), newStallWriter()
		sidSlow, _ := resumedHere(t, h, "token-a", "q-slow", slow)
		sidFast, _ := resumedHere(t, h, "token-b", "q-fast", fast)
		release := slow.stall()
		defer release() // a test failed: the bubble's goroutines end

		// An inbox holds twice what a log keeps; the client that reads
		// is sent no more, the stalled one twice that.
		held := 2 * h.o.Replay.Events
		sent := held
		heard := make(chan struct{})
		go func() { // the subscription's goroutine
			defer close(heard)
			for n := uint64(1); n <= uint64(2*held); n++ {
				h.received(signRelay(sharedKey, "token-a", relayedProgress(sidSlow, "q-slow", n)))
				if n <= uint64(sent) {
					h.received(signRelay(sharedKey, "token-b", relayedProgress(sidFast, "q-fast", n)))
				}
			}
		}()
		synctest.Wait()
		select {
		case <-heard:
		default:
			t.Fatal("the goroutine that hears the other instances waits on a stalled client")
		}
		if got := fast.progressEvents(); got != sent {
			t.Fatalf("the client that reads got %d of %d events while another stalled", got, sent)
		}

		release()
		synctest.Wait()
		// What its inbox held waited (and the one being written, if its
		// goroutine took it before the inbox filled); the rest was
		// dropped.
		got := slow.progressEvents()
		if got < held || got > held+1 {
			t.Fatalf("the stalled client got %d events, want %d or %d: those its inbox held, and the one being written", got, held, held+1)
		}
		out := slow.String()
		for n := 1; n < got; n++ {
			a, b := strings.Index(out, `"progress":`+strconv.Itoa(n)+`}`), strings.Index(out, `"progress":`+strconv.Itoa(n+1)+`}`)
			if a < 0 || b < a {
				t.Fatalf("the stalled client's events %d and %d are not in order: %s", n, n+1, out)
			}
		}

		// Close waits for the goroutine writing to a stalled client.
		release = slow.stall()
		h.received(signRelay(sharedKey, "token-a", relayedProgress(sidSlow, "q-slow", uint64(2*held+1))))
		synctest.Wait() // its goroutine is writing it
		closed := make(chan struct{})
		go func() {
			h.Close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while a stalled client's writer runs")
		default:
		}
		release()
		synctest.Wait()
		select {
		case <-closed:
		default:
			t.Fatal("Close did not return once the stalled client's write ended")
		}
	})
}
