package mcphttp

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// listen opens a session's standalone stream (GET), as the official SDK
// does after initialize, and returns its body; the stream's end closes
// the returned channel.
func listen(t *testing.T, base, token, sid string) (ended <-chan struct{}) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"?t="+token, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %v %v", resp, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
	t.Cleanup(func() {
		resp.Body.Close()
		<-done
	})
	return done
}

// TestListeningSessionIsIdle: a session whose only open request is its
// standalone stream is unused, and takes its turn to make way (its
// stream is closed); a session with a request in progress does not.
func TestListeningSessionIsIdle(t *testing.T) {
	h, base := newEndpoint(t, 2)
	a := dial(t, base, "token-a", "")
	b := dial(t, base, "token-a", "")
	aStream := listen(t, base, "token-a", a.GetSessionId())
	bStream := listen(t, base, "token-a", b.GetSessionId())

	// a has a request in progress: a POST whose body is still arriving.
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	req, _ := http.NewRequest(http.MethodPost, base+"?t=token-a", pr)
	req.Header.Set("Mcp-Session-Id", a.GetSessionId())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	posted := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		posted <- err
	}()
	if _, err := pw.Write([]byte(`{"jsonrpc":"2.0","id":99,`)); err != nil {
		t.Fatal(err)
	}
	h.waitRequests(a.GetSessionId(), 2) // the stream and the POST

	// b only listens: it makes way for c, and its stream ends.
	c := dial(t, base, "token-a", "")
	<-bStream
	if _, err := b.ListTools(context.Background(), mcp.ListToolsRequest{}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("the listening session that made way: %v", err)
	}
	select {
	case <-aStream:
		t.Error("the busy session's stream ended")
	default:
	}

	// Now a is busy and c is the newest: with c listening too, d replaces c
	// (unused the longest of the idle ones), not a.
	cStream := listen(t, base, "token-a", c.GetSessionId())
	d := dial(t, base, "token-a", "")
	<-cStream
	if _, err := d.ListTools(context.Background(), mcp.ListToolsRequest{}); err != nil {
		t.Errorf("the new session: %v", err)
	}
	_, _ = pw.Write([]byte(`"method":"ping"}`))
	pw.Close()
	if err := <-posted; err != nil {
		t.Errorf("the busy session's request: %v", err)
	}
	if _, err := a.ListTools(context.Background(), mcp.ListToolsRequest{}); err != nil {
		t.Errorf("the busy session was replaced: %v", err)
	}
}

// TestBusySessionsRefuseNewOnes: when every session has a request in
// progress, a new one is refused with 503, streams or not.
func TestBusySessionsRefuseNewOnes(t *testing.T) {
	h, base := newEndpoint(t, 1)
	a := dial(t, base, "token-a", "")
	listen(t, base, "token-a", a.GetSessionId())
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	req, _ := http.NewRequest(http.MethodPost, base+"?t=token-a", pr)
	req.Header.Set("Mcp-Session-Id", a.GetSessionId())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	_, _ = pw.Write([]byte(`{"jsonrpc":"2.0",`))
	h.waitRequests(a.GetSessionId(), 2)
	resp, err := http.Post(base+"?t=token-a", "application/json", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a new session while the only one is busy: %d", resp.StatusCode)
	}
}

// waitRequests waits until the server serves n requests of a session:
// the request's headers have reached the handler.
func (h *Handler) waitRequests(sid string, n int) {
	for {
		h.mu.Lock()
		got := 0
		for _, rm := range h.rooms {
			if s, _ := rm.sessions.Get(sid); s != nil {
				got = s.busy + len(s.streams)
			}
		}
		h.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
