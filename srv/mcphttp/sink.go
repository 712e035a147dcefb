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

// sink is one connection carrying a stream.
type sink struct {
	w     http.ResponseWriter
	gone  chan struct{} // closed when it carries the stream no longer
	until time.Time     // when set, the deadline of every write, else sendTimeout each
	// started: its response is the stream (a resume's always; the POST's
	// once begun). Guarded by its stream's mu.
	started bool
}

func newSink(w http.ResponseWriter) *sink { return &sink{w: w, gone: make(chan struct{})} }

// send writes one event and flushes it.
func (k *sink) send(id string, data []byte) error {
	if err := k.write(id, data); err != nil {
		return err
	}
	return k.flush()
}

// write writes one event, sent at the next flush: an ID (none when id is
// ""), and data, or no data at all for the event that opens a stream.
func (k *sink) write(id string, data []byte) error {
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
	rc := http.NewResponseController(k.w)
	_ = rc.SetWriteDeadline(k.deadline())
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	if _, err := k.w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	return nil
}

// flush sends what was written.
func (k *sink) flush() error {
	rc := http.NewResponseController(k.w)
	_ = rc.SetWriteDeadline(k.deadline())
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("flush event: %w", err)
	}
	return nil
}

func (k *sink) deadline() time.Time {
	if k.until.IsZero() {
		return time.Now().Add(sendTimeout)
	}
	return k.until
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

	mu     sync.Mutex
	h      http.Header
	status int
	buf    []byte
}

func (t *tap) Header() http.Header { return t.h }

func (t *tap) WriteHeader(code int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status == 0 {
		t.status = code
	}
}

// Flush does nothing: each event is flushed as it is recorded.
func (t *tap) Flush() {}

func (t *tap) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status == 0 {
		t.status = http.StatusOK
	}
	t.buf = append(t.buf, p...)
	if !t.sseLocked() {
		return len(p), nil // a JSON body: one message, at the end
	}
	for {
		i := bytes.Index(t.buf, []byte("\n\n"))
		if i < 0 {
			break
		}
		if data := sseData(t.buf[:i]); data != nil {
			data, method := t.st.log.numbered(data)
			if method != "" && t.log != nil {
				t.log.Debug("a request sent to the client", "method", method, "for_request", t.request)
			}
			t.st.record(data, false)
		}
		t.buf = t.buf[i+2:]
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
	defer st.mu.Unlock()
	if st.out != k || k.started || t.sseLocked() {
		return false
	}
	k.started = true // the timer's begin finds it taken
	for name, v := range t.h {
		k.w.Header()[name] = v
	}
	k.w.WriteHeader(cmp.Or(t.status, http.StatusOK))
	_, _ = k.w.Write(t.buf)
	return true
}

// begin begins k's response as the stream now, if it has not begun.
func (t *tap) begin(k *sink) {
	st := t.st
	st.mu.Lock()
	defer st.mu.Unlock()
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
	body := bytes.TrimSpace(t.buf)
	switch {
	case t.sseLocked() || (t.status == 0 && len(body) == 0):
	case t.status >= http.StatusMultipleChoices || !json.Valid(body):
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": t.id, "error": map[string]any{
			"code": -32603, "message": fmt.Sprintf("HTTP %d: %s", t.status, body)}})
		t.st.record(msg, true)
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
