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
