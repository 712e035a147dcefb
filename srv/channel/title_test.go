package channel

import (
	"strings"
	"testing"
	"unicode"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestTitleIsOneLineAsWritten: the agent's name and the project in a
// notice's title (Telegram's first line, Slack's, ntfy's title, the
// mail's Subject) cannot turn the rest of the line around or break it.
func TestTitleIsOneLineAsWritten(t *testing.T) {
	for _, c := range []struct{ agent, dir string }{
		{"Claude\u202e sksa", "/srv/shop"},
		{"Claude Code", "/srv/\u2067pohs\u2069\u200f"},
		{"Claude\r\nBcc: eve@example.org", "/srv/shop\u2028x"},
	} {
		got := title(Notice{Event: hub.Event{Kind: hub.Asked, Request: hub.Request{Kind: wire.AskQuestion, AgentName: c.agent, ProjectDirectory: c.dir}}})
		if strings.ContainsFunc(got, func(r rune) bool {
			return unicode.IsControl(r) || unicode.In(r, unicode.Bidi_Control, unicode.Zl, unicode.Zp)
		}) {
			t.Errorf("title of %q in %q: %q", c.agent, c.dir, got)
		}
	}
}

// TestTitleNamesWhoAsks: a question without an agent name is titled with
// the MCP client's name, as the inbox shows it; "Your agent" only when
// neither is known.
func TestTitleNamesWhoAsks(t *testing.T) {
	for _, c := range []struct{ agent, client, want string }{
		{"Claude Code", "claude-code", "Claude Code asks"},
		{"", "inspector-cli", "inspector-cli asks"},
		{"", "in\u202espector", "inspector asks"},
		{"", "", "Your agent asks"},
	} {
		got := title(Notice{Event: hub.Event{Kind: hub.Asked, Request: hub.Request{Kind: wire.AskQuestion, AgentName: c.agent, McpClientName: c.client}}})
		if got != c.want {
			t.Errorf("agent %q, client %q: %q, want %q", c.agent, c.client, got, c.want)
		}
	}
}
