package push

import (
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestBodyIsWhatAPersonReads: a notification's body is the question's
// text as the app shows it, in words: no link's address, no image's
// data, no list or quote marks, and a "#" that is no heading's mark
// kept; a lock screen shows two lines of it.
func TestBodyIsWhatAPersonReads(t *testing.T) {
	png := "data:image/png;base64," + strings.Repeat("iVBORw0KGgo", 40)
	for _, c := range []struct{ text, want string }{
		{"## Deploy\n\nShip **v2** to [staging](https://example.org/deploy?x=1) now?", "Deploy Ship v2 to staging now?"},
		{"![the failing plot](" + png + ")\n\nWhy does it dip?", "[image: the failing plot] Why does it dip?"},
		{"Pick one:\n\n- `make test`\n- make bench\n\n> quoted", "Pick one: make test make bench quoted"},
		{"Fix issue #42 in C#?", "Fix issue #42 in C#?"},
		{"部署到生产环境吗？ هل ننشر الآن؟ 🚀", "部署到生产环境吗？ هل ننشر الآن؟ 🚀"},
	} {
		ev := hub.Event{Kind: hub.Asked, Request: hub.Request{Kind: wire.AskQuestion, ID: "r", Text: c.text}}
		if got := askMessage(ev, "room", Subscription{}).Body; got != c.want {
			t.Errorf("body of %.40q = %q, want %q", c.text, got, c.want)
		}
	}
}

// TestTitleSetsRightToLeftNamesApart: an Arabic project or agent name in
// the title is set apart (FSI…PDI), so that the English line reads left
// to right around it; the parts the device words its own title with
// stay as given.
func TestTitleSetsRightToLeftNamesApart(t *testing.T) {
	ev := hub.Event{Kind: hub.Asked, Request: hub.Request{Kind: wire.AskQuestion, ID: "r", Text: "?", AgentName: "وكيل", ProjectDirectory: "/home/me/متجر"}}
	m := askMessage(ev, "room", Subscription{})
	if want := "\u2068متجر\u2069 · \u2068وكيل\u2069 asks"; m.Title != want {
		t.Errorf("title %q, want %q", m.Title, want)
	}
	if m.Asker != "وكيل" || m.Project != "متجر" {
		t.Errorf("asker %q, project %q", m.Asker, m.Project)
	}
}
