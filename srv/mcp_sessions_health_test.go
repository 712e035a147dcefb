package srv_test

import (
	"testing"

	"github.com/agentassistant/agentassistant/srv/inbox"
)

// TestHealthCountsMCPSessions: /health told every door's connections and
// sessions but /mcp's, the one a client that vanishes leaves behind (a
// token keeps [limits] mcp_sessions_per_token of them): mcpSessions says
// how many the server holds, a client's DELETE taking its own away.
func TestHealthCountsMCPSessions(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	sessions := func() float64 {
		t.Helper()
		_, m := call(t, "GET", url+"/health", "")
		n, ok := m["mcpSessions"].(float64)
		if !ok {
			t.Fatalf("/health has no mcpSessions: %v", m)
		}
		return n
	}
	if n := sessions(); n != 0 {
		t.Fatalf("%v MCP sessions before any client, want 0", n)
	}
	// The token in the URL too: mcp-go's client sends its headers with
	// every request but the DELETE that closes its session.
	a := mcpClient(t, url, tokA, "?token="+tokA)
	mcpClient(t, url, tokB, "")
	if n := sessions(); n != 2 {
		t.Fatalf("%v MCP sessions with two clients, want 2", n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n := sessions(); n != 1 {
		t.Fatalf("%v MCP sessions once one client closed its own, want 1", n)
	}
}
