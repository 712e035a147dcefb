package mcphttp

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// memStreams is the cluster's subjects in memory, for one instance: it
// keeps what the instance sends, for the test to look at and deliver.
type memStreams struct {
	mu   sync.Mutex
	sent []relayMsg
	// gone are the runs known gone (Origins); asked counts the questions.
	gone  map[string]bool
	asked int
}

func (m *memStreams) Run() string { return "run-self" }

func (m *memStreams) Gone(_ context.Context, run string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked++
	return m.gone[run]
}

// kill makes run known gone.
func (m *memStreams) kill(run string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone == nil {
		m.gone = make(map[string]bool)
	}
	m.gone[run] = true
}

func (m *memStreams) Tell([]byte)                          {}
func (m *memStreams) Listen(func([]byte)) (func(), error)  { return func() {}, nil }
func (m *memStreams) Receive(func([]byte)) (func(), error) { return func() {}, nil }

func (m *memStreams) Send(b []byte) {
	var r relayMsg
	if json.Unmarshal(b, &r) != nil {
		panic("an instance sent what is not a relayed message")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, r)
}

// take gives the messages of kind sent since the last take.
func (m *memStreams) take(kind string) []relayMsg {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out, rest []relayMsg
	for _, r := range m.sent {
		if r.Kind == kind {
			out = append(out, r)
		} else {
			rest = append(rest, r)
		}
	}
	m.sent = rest
	return out
}

// newTimedInstance is a Handler whose relayed messages go to the
// returned memStreams; its calls wait a minute for their client.
func newTimedInstance(t *testing.T) (*Handler, *memStreams) {
	t.Helper()
	ms := &memStreams{}
	h := New(Options{SessionKey: sharedKey, Peers: ms, Replay: ReplayLimits{Grace: time.Minute}})
	t.Cleanup(h.Close)
	if h.streams == nil {
		t.Fatal("the instance relays nothing")
	}
	return h, ms
}

// TestCarryRenewedEveryThirdOfGrace: the instance serving a resumed
// stream tells that it carries it at once, then every Grace/3 until it
// stops, each time naming the last event of the origin's log it has.
func TestCarryRenewedEveryThirdOfGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ms := newTimedInstance(t)
		l := newEventLog(h.o.Replay, true)
		st, _ := l.openResumed(func() {}, "q1", json.RawMessage("7"), func() {}, "", eventPos{tag: "origin", n: 3})
		start := time.Now()
		stop := sync.OnceFunc(h.carrying("token-a", "sid", "q1", st))
		defer stop() // a test failed: its goroutine ends in the bubble
		want := func(n uint64) {
			t.Helper()
			synctest.Wait()
			cs := ms.take(relayCarry)
			if len(cs) != 1 || cs[0].Request != "q1" || cs[0].Tag != "origin" || cs[0].N != n {
				t.Fatalf("at %v: carries %+v, want one naming origin-%d", time.Since(start), cs, n)
			}
		}
		none := func() {
			t.Helper()
			synctest.Wait()
			if cs := ms.take(relayCarry); len(cs) != 0 {
				t.Fatalf("at %v: %d carries, want none", time.Since(start), len(cs))
			}
		}
		want(3)
		for range 3 {
			time.Sleep(20*time.Second - time.Nanosecond)
			none()
			time.Sleep(time.Nanosecond)
			want(3)
		}
		// An event relayed meanwhile: the next carry names it.
		st.relayed("origin", 4, []byte(`{"jsonrpc":"2.0","method":"notifications/progress"}`))
		time.Sleep(20 * time.Second)
		want(4)
		stop()
		time.Sleep(time.Hour)
		none()
	})
}

// TestCarryLapses: a carry is the call's connection, where it began,
// for Grace: it relays its events meanwhile, and each carry puts the end
// off; Grace after the last one, it relays nothing more and the call
// ends, its client away.
func TestCarryLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, ms := newTimedInstance(t)
		l := newEventLog(h.o.Replay, true)
		var ended atomic.Bool
		st := l.open(func() { ended.Store(true) }, nil)
		k := st.attach(httptest.NewRecorder())
		st.mu.Lock()
		st.relay = &relayer{h: h, token: "token-a", sid: "sid", request: "q1"}
		st.mu.Unlock()
		progress := func(i int) []byte {
			return []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":` + string(rune('0'+i)) + `}}`)
		}
		st.record(progress(1), false)
		first := l.next
		st.detach(k)
		if got := ms.take(relayEvent); len(got) != 0 {
			t.Fatalf("events relayed before any carry: %+v", got)
		}

		time.Sleep(30 * time.Second) // half its own grace
		st.carried(l.tag, first-1)
		synctest.Wait()
		if evs := ms.take(relayEvent); len(evs) != 2 || evs[0].N != 0 || evs[1].N != first || string(evs[1].Data) != string(progress(1)) {
			t.Fatalf("a carry from before event %d: relayed %+v, want the marker and it", first, evs)
		}
		// Its own grace (a minute after the cut) passes: the carry holds it.
		time.Sleep(40 * time.Second)
		synctest.Wait()
		if ended.Load() {
			t.Fatal("ended while carried")
		}
		st.carried(l.tag, first) // renewed at 70 s
		_ = ms.take(relayEvent)
		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		if ended.Load() {
			t.Fatal("ended before Grace after the last carry")
		}
		if up, _ := st.State(); !up {
			t.Fatal("not connected while carried")
		}
		st.record(progress(2), false)
		if evs := ms.take(relayEvent); len(evs) != 1 || string(evs[0].Data) != string(progress(2)) {
			t.Fatalf("an event recorded while carried: relayed %+v", evs)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !ended.Load() {
			t.Fatal("not ended Grace after the last carry")
		}
		if up, _ := st.State(); up {
			t.Fatal("connected after the carry lapsed")
		}
		st.record(progress(3), false)
		if evs := ms.take(relayEvent); len(evs) != 0 {
			t.Fatalf("relayed after the carry lapsed: %+v", evs)
		}
		// A carry heard now, late, takes nothing up again.
		st.carried(l.tag, first)
		if evs := ms.take(relayEvent); len(evs) != 0 {
			t.Fatalf("a late carry relayed %+v", evs)
		}
	})
}

// TestOriginWait: a resumed stream whose own outcome came waits
// originWait for the response of the call where it began, once that
// call was heard from; until originWait after its first carry for that
// call to be heard from; not at all when it told no carry; and no
// longer than that response takes.
func TestOriginWait(t *testing.T) {
	response := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`)
	for _, tc := range []struct {
		name      string
		carried   bool
		heard     bool
		answerIn  time.Duration // 0: never
		want      time.Duration
		wantFinal bool
	}{
		{"no carry", false, false, 0, 0, false},
		{"carried, never heard", true, false, 0, originWait, false},
		{"carried, response after 1s", true, false, time.Second, time.Second, true},
		{"heard, no response", true, true, 0, originWait, false},
		{"heard, response after 1s", true, true, time.Second, time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := newEventLog(ReplayLimits{Events: 64, Bytes: 1 << 20, Age: time.Hour, Grace: time.Minute}, true)
				st, _ := l.openResumed(func() {}, "q1", json.RawMessage("7"), func() {}, "", eventPos{})
				if tc.carried {
					st.hearing = time.Now()
				}
				if tc.heard {
					st.relayed("origin", 0, nil)
				}
				if tc.answerIn > 0 {
					go func() {
						time.Sleep(tc.answerIn)
						st.relayed("origin", 9, response)
					}()
				}
				t0 := time.Now()
				final := st.awaitOrigin(nil)
				if took := time.Since(t0); took != tc.want || final != tc.wantFinal {
					t.Fatalf("awaitOrigin: %v after %v, want %v after %v", final, took, tc.wantFinal, tc.want)
				}
			})
		})
	}
}
