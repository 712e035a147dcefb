package e2e

import (
	"net/http"
	"testing"
)

// TestMCPSessionOutlivesRestart: the server restarts (a clean stop, or
// kill -9) while an agent's client holds an /mcp session. The client
// goes on with the session it has, as the official TypeScript SDK's
// client does (it never initializes again by itself): the restarted
// server serves it rather than answering 404 until the person
// reconnects the MCP client by hand.
func TestMCPSessionOutlivesRestart(t *testing.T) {
	for _, how := range []string{"clean", "kill"} {
		t.Run(how, func(t *testing.T) {
			port, data := freePort(t), t.TempDir()
			s := startServerWith(t, port, data, nil, tokenA)
			agent := &rawMCP{t: t, url: s.URL + "/mcp"}
			agent.initialize()
			if how == "clean" {
				s.stopCleanly(t)
			} else {
				s.kill9(t)
			}
			s2 := startServerWith(t, port, data, nil, tokenA)
			if code := mcpStatus(t, s2, agent.sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); code != http.StatusOK {
				t.Fatalf("the session after the restart: %d, want 200", code)
			}
		})
	}
}

// TestMCPSessionEndedOutlivesRestart: a client ends its /mcp session
// (DELETE), then the server restarts (a clean stop, or kill -9 as soon
// as the DELETE is answered). The ended ID stays ended: whoever still
// holds it, with the token, gets 404 rather than the session served
// again under its signed ID.
func TestMCPSessionEndedOutlivesRestart(t *testing.T) {
	for _, how := range []string{"clean", "kill"} {
		t.Run(how, func(t *testing.T) {
			port, data := freePort(t), t.TempDir()
			s := startServerWith(t, port, data, nil, tokenA)
			agent := &rawMCP{t: t, url: s.URL + "/mcp"}
			agent.initialize()
			_ = agent.do(http.MethodDelete, "", nil)
			const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
			if code := mcpStatus(t, s, agent.sid, list); code != http.StatusNotFound {
				t.Fatalf("the session after its DELETE: %d, want 404", code)
			}
			if how == "clean" {
				s.stopCleanly(t)
			} else {
				s.kill9(t)
			}
			s2 := startServerWith(t, port, data, nil, tokenA)
			if code := mcpStatus(t, s2, agent.sid, list); code != http.StatusNotFound {
				t.Fatalf("the ended session after the restart: %d, want 404", code)
			}
		})
	}
}
