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

// TestTitleSetsRightToLeftNamesApart: an Arabic or Hebrew project, agent
// or device name is set apart (FSI…PDI) in the English words around it,
// so that the line still reads left to right ("متجر · Claude asks", not
// a line a client sets right to left by its first letter) and the name
// reads as written; the mail's Subject sets a right-to-left question
// apart likewise. A left-to-right name is left as it is.
func TestTitleSetsRightToLeftNamesApart(t *testing.T) {
	ask := func(agent, dir, q string) Notice {
		return Notice{Event: hub.Event{Kind: hub.Asked, Request: hub.Request{Kind: wire.AskQuestion, AgentName: agent, ProjectDirectory: dir, Text: q}}}
	}
	for _, c := range []struct {
		n    Notice
		want string
	}{
		{ask("Claude", "/home/me/متجر", ""), "\u2068متجر\u2069 · Claude asks"},
		{ask("وكيل", "/srv/shop", ""), "shop · \u2068وكيل\u2069 asks"},
		{ask("סוכן\u202e", "/srv/חנות", ""), "\u2068חנות\u2069 · \u2068סוכן\u2069 asks"},
		{Notice{Event: hub.Event{Kind: hub.Answered, Request: hub.Request{ProjectDirectory: "/srv/shop"}, Reply: &hub.Reply{Nickname: "هاتفي"}}}, "shop · Answered on \u2068هاتفي\u2069"},
		{ask("Claude", "/srv/商店", ""), "商店 · Claude asks"},
	} {
		if got := title(c.n); got != c.want {
			t.Errorf("title: %q, want %q", got, c.want)
		}
	}
	if got, want := emailSubject(ask("Claude", "/srv/shop", "هل ننشر v2 الآن؟\n\nDeploy v2 now?")), "[agentassistant] shop · Claude asks: \u2068هل ننشر v2 الآن؟ Deploy v2 now?\u2069"; got != want {
		t.Errorf("subject: %q, want %q", got, want)
	}
	if got, want := emailSubject(ask("Claude", "/srv/shop", "Deploy v2 now?")), "[agentassistant] shop · Claude asks: Deploy v2 now?"; got != want {
		t.Errorf("subject: %q, want %q", got, want)
	}
}
