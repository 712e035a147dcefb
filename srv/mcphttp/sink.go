package mcphttp

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// A call's stream on the wire: the connection that carries it (sink),
// and the response writer mcp-go writes the call's response to (tap),
// which records each of its events in the session's log (resume.go).

// sink is one connection carrying a stream. What is written to it is
// queued under its stream's lock, in the order of the stream's events,
// and written after that lock is let go (pump), by one goroutine at a
// time: a client that does not read holds up the goroutine that writes
// to it, for up to sendTimeout a write, never its stream's lock, so
// the stream's state is read, its connection taken over by a resume
// and its events recorded meanwhile. Lock order: its stream's mu, then
// its mu (a leaf).
type sink struct {
	w    http.ResponseWriter
	gone chan struct{} // closed when it carries the stream no longer
	// started: its response is the stream (a resume's always; the POST's
	// once begun). Guarded by its stream's mu.
	started bool

	mu      sync.Mutex
	q       []frame // to write, oldest first
	writing bool    // a goroutine writes q
	idle    chan struct{}
	failed  bool // a write failed: nothing more is written
	closed  bool // its handler is done with it: nothing more is written
}

// frame is one thing to write to a connection: the response's header
// (an event stream's, or header and status), an event, a body as it
// is, and whether to flush after it.
type frame struct {
	header http.Header // set: WriteHeader(status) with it first
	status int
	id     string
	data   []byte
	event  bool // an SSE event of id and data
	raw    []byte
	flush  bool
	// until, when set, is the deadline of its write, else sendTimeout
	// from its start.
	until time.Time
}

func newSink(w http.ResponseWriter) *sink { return &sink{w: w, gone: make(chan struct{})} }

// streamHeader is the header of a response that is an event stream.
func streamHeader() http.Header {
	return http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache"}}
}

// queue queues fs to be written by the next pump. Its stream's mu is held.
func (k *sink) queue(fs ...frame) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.failed && !k.closed {
		k.q = append(k.q, fs...)
	}
}

// send queues one event, flushed. Its stream's mu is held.
func (k *sink) send(id string, data []byte) {
	k.queue(frame{event: true, id: id, data: data, flush: true})
}

// pump writes what is queued, unless another goroutine is writing it
// already (that one writes what comes meanwhile too). Called with no
// lock held. It fails when a write failed: the caller detaches k.
func (k *sink) pump() error {
	k.mu.Lock()
	if k.writing {
		k.mu.Unlock()
		return nil
	}
	k.writing, k.idle = true, make(chan struct{})
	defer func() {
		k.writing = false
		close(k.idle)
		k.mu.Unlock()
	}()
	for len(k.q) > 0 && !k.failed && !k.closed {
		f := k.q[0]
		k.q[0] = frame{}
		k.q = k.q[1:]
		k.mu.Unlock()
		err := k.write(f)
		k.mu.Lock()
		if err != nil {
			k.failed, k.q = true, nil
			return err
		}
	}
	return nil
}

// finish writes what is queued for k (a stream's last events, queued
// as it ended), waits until nothing is written to it, and writes
// nothing more to it: its handler returns after it.
func (k *sink) finish() {
	for {
		k.mu.Lock()
		if k.writing {
			idle := k.idle
			k.mu.Unlock()
			<-idle
			continue
		}
		if len(k.q) == 0 || k.failed {
			k.closed, k.q = true, nil
			k.mu.Unlock()
			return
		}
		k.mu.Unlock()
		_ = k.pump() // a failure: the stream took k away, or it ended
	}
}

// write writes one frame, and flushes it when it says so.
func (k *sink) write(f frame) error {
	rc := http.NewResponseController(k.w)
	_ = rc.SetWriteDeadline(cmp.Or(f.until, time.Now().Add(sendTimeout)))
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	if f.header != nil {
		for name, v := range f.header {
			k.w.Header()[name] = v
		}
		k.w.WriteHeader(cmp.Or(f.status, http.StatusOK))
	}
	var b []byte
	switch {
	case f.event:
		b = eventBytes(f.id, f.data)
	case f.raw != nil:
		b = f.raw
	}
	if len(b) > 0 {
		if _, err := k.w.Write(b); err != nil {
			return fmt.Errorf("write event: %w", err)
		}
	}
	if f.flush {
		if err := rc.Flush(); err != nil {
			return fmt.Errorf("flush event: %w", err)
		}
	}
	return nil
}

// eventBytes is one event on the wire: an ID (none when id is ""), and
// data, or no data at all for the event that opens a stream.
func eventBytes(id string, data []byte) []byte {
	var b bytes.Buffer
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	if data == nil {
		b.WriteString("data: \n\n")
	} else {
		b.WriteString("event: message\ndata: ")
		b.Write(data)
		b.WriteString("\n\n")
	}
	return b.Bytes()
}

// tap is the response writer mcp-go answers a call on: each message it
// writes, an SSE event or a JSON body, becomes an event of the call's
// stream.
type tap struct {
	st *callStream
	id json.RawMessage // the call's JSON-RPC id
	// log tells of the requests it sends the client (its forms), with
	// the ID of the request of the call's (request).
	log     *slog.Logger
	request string

	mu sync.Mutex
	// captured is what mcp-go wrote that is no event yet; its Flush does
	// nothing: each event is flushed as it is recorded.
	captured
}

func (t *tap) WriteHeader(code int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.captured.WriteHeader(code)
}

func (t *tap) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = t.captured.Write(p)
	if !t.sseLocked() {
		return len(p), nil // a JSON body: one message, at the end
	}
	for {
		i := bytes.Index(t.body.Bytes(), []byte("\n\n"))
		if i < 0 {
			break
		}
		if data := sseData(t.body.Next(i + 2)[:i]); data != nil { // a copy: sseData joins the lines anew
			data, method := t.st.log.numbered(data)
			if method != "" && t.log != nil {
				t.log.Debug("a request sent to the client", "method", method, "for_request", t.request)
			}
			t.st.record(data, false)
		}
	}
	return len(p), nil
}

func (t *tap) sseLocked() bool {
	return strings.HasPrefix(t.h.Get("Content-Type"), "text/event-stream")
}

// direct answers the call on k's connection as mcp-go answered it, when
// its response has not begun as the stream and mcp-go wrote one body (no
// events): reports whether it did.
func (t *tap) direct(k *sink) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.st
	st.mu.Lock()
	defer st.unlockPump()
	if st.out != k || k.started || t.sseLocked() {
		return false
	}
	k.started = true // the timer's begin finds it taken
	k.queue(frame{header: t.h.Clone(), status: t.status, raw: bytes.Clone(t.body.Bytes())})
	st.pumpLocked(k)
	return true
}

// begin begins k's response as the stream now, if it has not begun.
func (t *tap) begin(k *sink) {
	st := t.st
	st.mu.Lock()
	defer st.unlockPump()
	if st.out == k && !k.started {
		st.beginLocked(k)
	}
}

// finish ends the stream once mcp-go is done with the call: a JSON body
// is its last event; a refusal becomes a JSON-RPC error, since the
// response began as a stream.
func (t *tap) finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	body := bytes.TrimSpace(t.body.Bytes())
	switch {
	case t.sseLocked() || (t.status == 0 && len(body) == 0):
	case t.status >= http.StatusMultipleChoices || !json.Valid(body):
		t.st.record(rpcError(t.id, internalError, fmt.Sprintf("HTTP %d: %s", t.status, body)), true)
	default:
		var compact bytes.Buffer
		if json.Compact(&compact, body) == nil {
			t.st.record(compact.Bytes(), true)
		}
	}
	t.st.end()
}

// sseData is the data of one SSE event (its data lines joined), nil when
// it has none.
func sseData(ev []byte) []byte {
	var data []byte
	seen := false
	for line := range bytes.SplitSeq(ev, []byte("\n")) {
		v, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\r")), []byte("data:"))
		if !ok {
			continue
		}
		v = bytes.TrimPrefix(v, []byte(" "))
		if seen {
			data = append(data, '\n')
		}
		data, seen = append(data, v...), true
	}
	return data
}
