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
// of that call's stream (never another call's), and keeps nothing: the
// work of a storm is the log's bound times the carries, its memory one
// lease.
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
