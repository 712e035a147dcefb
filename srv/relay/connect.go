package relay

import "fmt"

// ConnectAgent says how to connect an agent to relay session name: the
// MCP bridge's command (no -session for DefaultSession), the server's
// /mcp, or /agent/ws. Every front door's "no agent" error says it so.
func ConnectAgent(name string) string {
	bridge := "agentassistant-mcp -session " + name
	if name == DefaultSession {
		bridge = "agentassistant-mcp (without -session)"
	}
	return fmt.Sprintf("start the MCP client with %s (or point it at the server's /mcp?session=%s), or join /agent/ws as an agent in session %q",
		bridge, name, name)
}
