package mcphttp

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestOtherMethods: a method the transport does not define is 405 with
// Allow, with or without a session, never the 400 of a missing session
// nor the 404 that tells a client its session has ended.
func TestOtherMethods(t *testing.T) {
	_, base := newEndpoint(t, 0)
	c := dial(t, base, "token-a", "")
	for _, m := range []string{http.MethodPut, http.MethodPatch, http.MethodOptions, http.MethodHead, http.MethodTrace, "PROPFIND"} {
		for _, sid := range []string{"", c.GetSessionId()} {
			req, _ := http.NewRequest(m, base+"?t=token-a", nil)
			if sid != "" {
				req.Header.Set("Mcp-Session-Id", sid)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, POST, DELETE" {
				t.Errorf("%s (session %v): %d Allow %q", m, sid != "", resp.StatusCode, resp.Header.Get("Allow"))
			}
		}
	}
	// The session is still there.
	if _, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil {
		t.Errorf("the session after the refused methods: %v", err)
	}
}

// TestNoSessionNoInitialize: a POST without Mcp-Session-Id that is not an
// initialize belongs to no session and opens none: it is the 400 the
// transport's specification names, with a JSON-RPC error for its id, not
// the 404 that tells a client its session has ended; and at the cap it
// makes no session idle the longest give way for nothing.
func TestNoSessionNoInitialize(t *testing.T) {
	h, base := newEndpoint(t, 1)
	c := dial(t, base, "token-a", "")
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"p","method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
	} {
		req, _ := http.NewRequest(http.MethodPost, base+"?t=token-a", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			ID    json.RawMessage
			Error struct {
				Code    int
				Message string
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || err != nil || out.Error.Code != invalidRequest ||
			!strings.Contains(out.Error.Message, "Mcp-Session-Id") {
			t.Errorf("%s without a session: %d %+v (%v)", body, resp.StatusCode, out, err)
		}
		if want := `"p"`; strings.Contains(body, `"id":"p"`) && string(out.ID) != want {
			t.Errorf("%s: answered for id %s, want %s", body, out.ID, want)
		}
	}
	if _, sessions := h.state(); sessions["token-a"] != 1 {
		t.Errorf("sessions of the token: %d, want the one", sessions["token-a"])
	}
	if _, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil {
		t.Errorf("the session after the requests without one: %v", err)
	}
}
