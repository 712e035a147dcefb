package mcphttp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// enteringWriter is a stallWriter that tells when a write waits.
type enteringWriter struct {
	*stallWriter
	entered chan struct{}
}

func (w enteringWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	return w.stallWriter.Write(p)
}

// TestWriteOutsideStreamLock: a client that does not read holds up a
// write to it, never its stream: while the write waits, the stream's
// lock is free (its state read, its connection taken over by a resume),
// and once the client reads, it gets the events in the order recorded.
func TestWriteOutsideStreamLock(t *testing.T) {
	l := newEventLog(ReplayLimits{Events: 64, Bytes: 1 << 20, Age: time.Hour, Grace: time.Minute}, true)
	st, _ := l.openResumed(func() {}, "q1", json.RawMessage("7"), func() {}, "", eventPos{})
	w := enteringWriter{newStallWriter(), make(chan struct{}, 1)}
	st.attachResumed(w)
	<-w.entered // the first event
	release := w.stall()
	defer release()

	done := make(chan struct{})
	go func() {
		defer close(done)
		st.record([]byte(`{"n":1}`), false)
		st.record([]byte(`{"n":2}`), false)
	}()
	<-w.entered
	if !st.mu.TryLock() {
		t.Fatal("the stream's lock is held while a write waits on its client")
	}
	st.mu.Unlock()
	release()
	<-done
	if out := w.String(); !strings.Contains(out, `{"n":1}`) || strings.Index(out, `{"n":1}`) > strings.Index(out, `{"n":2}`) {
		t.Fatalf("the events, written:\n%s", out)
	}
}

// TestReplayOutsideStreamLock: a resume's replay of what its client
// missed is written with the stream's lock free too.
func TestReplayOutsideStreamLock(t *testing.T) {
	l := newEventLog(ReplayLimits{Events: 64, Bytes: 1 << 20, Age: time.Hour, Grace: time.Minute}, false)
	st := l.open(func() {}, nil)
	k := st.attach(httptest.NewRecorder())
	st.record([]byte(`{"n":1}`), false)
	st.record([]byte(`{"n":2}`), false)
	st.detach(k)
	first := l.id(st.first)

	w := enteringWriter{newStallWriter(), make(chan struct{}, 1)}
	release := w.stall()
	defer release()
	r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.resume(w, r, first)
	}()
	<-w.entered
	if !st.mu.TryLock() {
		t.Fatal("the stream's lock is held while a replay waits on its client")
	}
	st.mu.Unlock()
	release()
	st.end()
	<-done
	if out := w.String(); !strings.Contains(out, `{"n":1}`) || strings.Index(out, `{"n":1}`) > strings.Index(out, `{"n":2}`) {
		t.Fatalf("the replay, written:\n%s", out)
	}
}
