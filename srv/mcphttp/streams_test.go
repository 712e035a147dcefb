package mcphttp

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestOneStandaloneStreamPerSession: a session has at most one standalone
// stream (GET) open; another one while it is open is refused with 409
// Conflict and a body that says why, as the official SDK's server does,
// and holds nothing. Once the first has ended, the session may open a
// new one; the refusals did not disturb the session.
func TestOneStandaloneStreamPerSession(t *testing.T) {
	h, base := newEndpoint(t, 0)
	c := dial(t, base, "token-a", "")
	sid := c.GetSessionId()
	get := func() *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"?t=token-a", nil)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := get()
	if first.StatusCode != http.StatusOK {
		t.Fatalf("the first stream: %d", first.StatusCode)
	}
	for range 5 {
		resp := get()
		if resp.StatusCode != http.StatusConflict {
			resp.Body.Close()
			t.Fatalf("a second stream of the session: %d", resp.StatusCode)
		}
		body, _ := io.ReadAll(resp.Body) // a refusal ends: its body is whole
		resp.Body.Close()
		if !strings.Contains(string(body), "stream") {
			t.Fatalf("the refusal says: %q", body)
		}
	}
	if n := h.streamsOf(sid); n != 1 {
		t.Errorf("streams held: %d", n)
	}
	if _, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil {
		t.Errorf("the session after the refused streams: %v", err)
	}

	first.Body.Close()
	h.waitStreams(sid, 0)
	again := get()
	again.Body.Close()
	if again.StatusCode != http.StatusOK {
		t.Errorf("a stream after the first ended: %d", again.StatusCode)
	}
}

func (h *Handler) streamsOf(sid string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, rm := range h.rooms {
		if s, _ := rm.sessions.Get(sid); s != nil {
			return len(s.streams)
		}
	}
	return -1
}

// waitStreams waits until a session has n standalone streams open.
func (h *Handler) waitStreams(sid string, n int) {
	for h.streamsOf(sid) != n {
		time.Sleep(time.Millisecond)
	}
}

// TestStreamNeedsAnEventStreamClient: a GET whose Accept names no
// text/event-stream (the transport's specification has the client list
// it) is 406 Not Acceptable, as the official SDK's server answers, rather
// than a stream it did not ask for; it holds nothing, and a GET that
// accepts it (or any type) has its stream.
func TestStreamNeedsAnEventStreamClient(t *testing.T) {
	h, base := newEndpoint(t, 0)
	c := dial(t, base, "token-a", "")
	sid := c.GetSessionId()
	for _, tc := range []struct {
		accept string
		want   int
	}{
		{"application/json", http.StatusNotAcceptable},
		{"text/html, application/json;q=0.9", http.StatusNotAcceptable},
		{"text/event-stream", http.StatusOK},
		{"application/json, text/event-stream;q=0.5", http.StatusOK},
		{"*/*", http.StatusOK},
		{"text/*", http.StatusOK},
		// The most specific range wins (RFC 9110, 12.5.1).
		{"text/event-stream;q=0, */*", http.StatusNotAcceptable},
		{"text/*;q=0, */*", http.StatusNotAcceptable},
		{"text/*;q=0, text/event-stream", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, base+"?t=token-a", nil)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Accept", tc.accept)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Accept %q: %d, want %d", tc.accept, resp.StatusCode, tc.want)
		}
		h.waitStreams(sid, 0)
	}
	if _, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil {
		t.Errorf("the session after the refused streams: %v", err)
	}
}
