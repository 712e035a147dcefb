package mcphttp

import (
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// TestCarryStormBounded: carries come over and over, as from a client
// that resumes the same stream through two instances at once, again and
// again. Each carry resends at most the events the session's log keeps
// of that call's stream (never another call's), and keeps nothing: its
// memory is one lease (its work, within a renewal, twice the log's
// bound: TestCarryStormResendsWithinABudget).
func TestCarryStormBounded(t *testing.T) {
	h, ms := newTimedInstance(t)
	const keep = 16
	l := newEventLog(ReplayLimits{Events: keep, Bytes: 1 << 20, Age: time.Hour, Grace: time.Minute}, true)
	st := l.open(func() {}, nil)
	other := l.open(func() {}, nil)
	st.detach(st.attach(httptest.NewRecorder()))
	other.detach(other.attach(httptest.NewRecorder()))
	st.mu.Lock()
	st.relay = &relayer{h: h, token: "token-a", sid: "sid", request: "q1"}
	st.mu.Unlock()
	for i := range 100 {
		st.record([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":`+strconv.Itoa(i)+`}}`), false)
		other.record([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"n":`+strconv.Itoa(i)+`}}`), false)
	}
	l.mu.Lock()
	oldest := l.events[0].n
	l.mu.Unlock()
	for i := range 1000 {
		// From every event kept, one no longer kept, or none: B's and C's
		// words, each behind.
		st.carried(l.tag, oldest-1+uint64(i%(keep+1)))
		evs := ms.take(relayEvent)
		if len(evs) == 0 || len(evs) > 1+keep/2 {
			t.Fatalf("carry %d relayed %d events, want the marker and at most the %d of the stream kept", i, len(evs), keep/2)
		}
		for _, e := range evs[1:] {
			if e.Request != "q1" || string(e.Data) == "" || e.Data[len(`{"jsonrpc":"2.0","method":"notifications/`)] != 'p' {
				t.Fatalf("carry %d relayed %s", i, e.Data)
			}
		}
	}
	if len(ms.sent) != 0 {
		t.Fatalf("%d other messages kept", len(ms.sent))
	}
}

// TestCarryStormResendsWithinABudget: a client resuming a call's stream
// over and over, through instances in turn, makes a carry each time,
// each naming an early event. Within a carry's renewal the call's
// instance sends again at most twice what its log keeps, not its log
// per carry; every carry still keeps the call carried.
func TestCarryStormResendsWithinABudget(t *testing.T) {
	h, ms := newTimedInstance(t)
	const bytes = 4096
	l := newEventLog(ReplayLimits{Events: 64, Bytes: bytes, Age: time.Hour, Grace: time.Hour}, true)
	st := l.open(func() {}, nil)
	st.detach(st.attach(httptest.NewRecorder()))
	st.mu.Lock()
	st.relay = &relayer{h: h, token: "token-a", sid: "sid", request: "q1"}
	st.mu.Unlock()
	for i := range 100 {
		st.record([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":`+strconv.Itoa(i)+`}}`), false)
	}
	l.mu.Lock()
	oldest := l.events[0].n
	l.mu.Unlock()
	resent := 0
	for i := range 1000 {
		st.carried(l.tag, oldest)
		evs := ms.take(relayEvent)
		if len(evs) == 0 {
			t.Fatalf("carry %d: not even the marker that the call is here", i)
		}
		for _, e := range evs {
			resent += len(e.Data)
		}
	}
	if resent > 2*bytes {
		t.Errorf("1,000 carries sent %d bytes of events again, want at most %d", resent, 2*bytes)
	}
}
