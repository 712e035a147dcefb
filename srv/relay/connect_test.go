package relay_test

import (
	"testing"

	"github.com/agentassistant/agentassistant/srv/relay"
)

// TestConnectAgent: one sentence says how to connect an agent to a relay
// session, whichever front door's error tells it.
func TestConnectAgent(t *testing.T) {
	for _, tc := range []struct{ session, want string }{
		{"th", `start the MCP client with agentassistant-mcp -session th (or point it at the server's /mcp?session=th), or join /agent/ws as an agent in session "th"`},
		{relay.DefaultSession, `start the MCP client with agentassistant-mcp (without -session; or point it at the server's /mcp?session=default), or join /agent/ws as an agent in session "default"`},
	} {
		if got := relay.ConnectAgent(tc.session); got != tc.want {
			t.Errorf("ConnectAgent(%q) = %q, want %q", tc.session, got, tc.want)
		}
	}
}
