package channel

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestSlackParentTagOnlyFromTheBot: a thread's first message is read for
// the tag of its buttons only when the bot posted it. A person's message
// carrying a question's tag in a button of its own (blocks a user can
// post with a client of theirs) is no copy of that question.
func TestSlackParentTagOnlyFromTheBot(t *testing.T) {
	const blocks = `"blocks":[{"type":"actions","elements":[{"type":"button","action_id":"a0","text":{"type":"plain_text","text":"Yes"},"value":"a:0:TAGTAG"}]}]`
	for _, c := range []struct {
		name, author, want string
	}{
		{"the bot's", `"user":"UBOT","bot_id":"B1"`, "TAGTAG"},
		{"a person's", `"user":"U42"`, ""},
		{"another bot's", `"user":"UOTHER","bot_id":"B2"`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"ok":true,"messages":[{"type":"message",%s,"ts":"1.1","text":"Deploy?",%s}]}`, c.author, blocks)
			}))
			defer api.Close()
			sl := &Slack{BotToken: "xoxb-1", AppToken: "xapp-1", Channel: "U42", Users: []string{"U42"}, APIURL: api.URL}
			sl.botUser.Store("UBOT")
			if got := sl.parentTag(t.Context(), "D42", "1.1"); got != c.want {
				t.Errorf("tag %q, want %q", got, c.want)
			}
		})
	}
}
