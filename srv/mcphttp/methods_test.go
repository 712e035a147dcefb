package mcphttp

import (
	"net/http"
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
