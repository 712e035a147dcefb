package mcphttp

import (
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// ids of the events a stream has after id, or the error.
func replayed(l *eventLog, id string) (string, error) {
	_, evs, err := l.after(id)
	var got []string
	for _, e := range evs {
		got = append(got, string(e.data))
	}
	return strings.Join(got, ","), err
}

// TestReplayBounded: a session keeps its latest events only, by count,
// by bytes and by age; one too large to keep is sent without an ID, and
// a resume that would skip it is refused rather than replay a gap.
// addID keeps data as st's next event and gives its ID ("" when it is
// not kept).
func addID(l *eventLog, st *callStream, data []byte) string {
	if n := l.add(st, data); n > 0 {
		return l.id(n)
	}
	return ""
}

func TestReplayBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newEventLog(ReplayLimits{Events: 3, Bytes: 10, Age: time.Minute, Grace: time.Second}, false)
		st := l.open(func() {}, nil)
		open := addID(l, st, nil)
		a := addID(l, st, []byte("aaa"))
		b := addID(l, st, []byte("bbb"))
		if got, err := replayed(l, open); got != "aaa,bbb" || err != nil {
			t.Errorf("after the opening event: %q %v", got, err)
		}
		c := addID(l, st, []byte("ccc")) // four events: the oldest goes
		if _, err := replayed(l, open); !errors.Is(err, errEventGone) {
			t.Errorf("the oldest of four, three kept: %v", err)
		}
		if got, err := replayed(l, a); got != "bbb,ccc" || err != nil {
			t.Errorf("after a: %q %v", got, err)
		}
		e := addID(l, st, []byte("eeeee")) // a goes by count, then b by bytes: 3+3+5 > 10
		if got, err := replayed(l, b); !errors.Is(err, errEventGone) {
			t.Errorf("over ten bytes kept: %q %v", got, err)
		}
		if got, err := replayed(l, c); got != "eeeee" || err != nil {
			t.Errorf("after c: %q %v", got, err)
		}
		if id := addID(l, st, []byte("much too large")); id != "" {
			t.Errorf("an event over the bytes kept has ID %q", id)
		}
		if _, err := replayed(l, e); !errors.Is(err, errEventGap) {
			t.Errorf("a resume past an event not kept: %v", err)
		}
		other := l.open(func() {}, nil)
		f := addID(l, other, []byte("f"))
		addID(l, st, []byte("g"))
		addID(l, other, []byte("h"))
		if got, err := replayed(l, f); got != "h" || err != nil {
			t.Errorf("another stream's events: %q %v", got, err)
		}
		time.Sleep(time.Minute + time.Second)
		if _, err := replayed(l, f); !errors.Is(err, errEventGone) {
			t.Errorf("an event past its age: %v", err)
		}
	})
}

// TestCutCallWaitsGrace: a call whose stream has no connection ends once
// it has been away for Grace, not before; a resume within it restarts
// the count.
func TestCutCallWaitsGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ended atomic.Bool
		l := newEventLog(ReplayLimits{Events: 64, Bytes: 1 << 20, Age: time.Hour, Grace: time.Minute}, false)
		st := l.open(func() { ended.Store(true) }, nil)
		k := st.attach(httptest.NewRecorder())
		st.detach(k)
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if ended.Load() {
			t.Fatal("ended before its grace")
		}
		k = newSink(httptest.NewRecorder())
		st.mu.Lock()
		st.attachLocked(k)
		st.mu.Unlock()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if ended.Load() {
			t.Fatal("ended while resumed")
		}
		st.detach(k)
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if !ended.Load() {
			t.Fatal("not ended a grace after its stream was cut")
		}
	})
}

// TestForgottenSessionEndsItsCalls: once the session is forgotten (its
// client ended it) its calls end, one away and one still connected: no
// one can resume the first, and the second's client ended the session.
func TestForgottenSessionEndsItsCalls(t *testing.T) {
	var away, there atomic.Bool
	l := newEventLog(ReplayLimits{Events: 64, Bytes: 1 << 20, Age: time.Hour, Grace: time.Hour}, false)
	a := l.open(func() { away.Store(true) }, nil)
	a.detach(a.attach(httptest.NewRecorder()))
	b := l.open(func() { there.Store(true) }, nil)
	b.attach(httptest.NewRecorder())
	l.close()
	if !away.Load() || !there.Load() {
		t.Fatalf("after the session: away ended %v, connected ended %v", away.Load(), there.Load())
	}
}
