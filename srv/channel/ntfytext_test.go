package channel

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// mdLink is a markdown link or image as ntfy would render it: [text](dest).
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\([^)]*\)`)

// TestNtfyShowsWhereLinksGo: ntfy renders the markdown it is given, so
// a question quoting what others wrote ([bank.example](elsewhere), a
// javascript: link, a tracking image, raw HTML, in the text or in an
// option's description) reaches ntfy as plain lines, each link's
// address written after its text and nothing ntfy would render as a
// link, image or tag; a question of plain markdown, links that say
// where they go included, stays markdown.
func TestNtfyShowsWhereLinksGo(t *testing.T) {
	for _, c := range []struct {
		name, text, desc string
		label            string // the first option's, "A" unless set
		markdown         bool
		want             []string // in the message
	}{
		{"a link naming another place", "Sign in at [bank.example](https://evil.example/login) now.\n\n- first\n- second", "", "", false,
			[]string{"Sign in at bank.example (https://evil.example/login) now.", "- first\n- second"}},
		{"a hidden character in the link's text", "Open [bank\u200b.example](https://bank.example.evil.example/)", "", "", false,
			[]string{"bank\u200b.example (https://bank.example.evil.example/)"}},
		{"a javascript: link", "[Continue](javascript:alert(1))", "", "", false, []string{"Continue"}},
		{"a tracking image", "Plot:\n\n![the plot](https://tracker.example/p.png?u=ana)", "", "", false,
			[]string{"[image: the plot] (https://tracker.example/p.png?u=ana)"}},
		{"a reference link", "See [bank.example][1].\n\n[1]: https://evil.example/", "", "", false,
			[]string{"See bank.example (https://evil.example/)."}},
		{"raw HTML", `Sign in <a href="https://evil.example">bank.example</a>`, "", "", false,
			[]string{`<a href="https://evil.example">bank.example</a>`}},
		{"in an option's description", "Which?", "see [docs.example](https://evil.example/)", "", false,
			[]string{"Which?\n\n- A — see [docs.example](https://evil.example/)"}},
		{"a code span cut open", "`\n[bank.example](https://evil.example/)\n" + strings.Repeat("The copy mirrors every write.\n", 200) + "`", "", "", false,
			[]string{"bank.example (https://evil.example/)"}},
		{"a definition in an option's label", "See [bank.example][1].", "either", "[1]: https://evil.example/", false,
			[]string{"See [bank.example][1]."}},
		{"plain markdown", "## Deploy\n\nShip **v2** to [staging](https://staging.example/) or see <https://grafana.example/d/1>?", "", "", true,
			[]string{"## Deploy\n\nShip **v2** to [staging](https://staging.example/) or see <https://grafana.example/d/1>?"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ntfy := newReceiver(t)
			var qs []*pb.Question
			if c.desc != "" {
				a, b := &pb.Option{Label: "A", Description: c.desc}, &pb.Option{Label: "B"}
				if c.label != "" { // the label alone on its line, the description on the other's
					a.Label, a.Description, b.Description = c.label, "", c.desc
				}
				qs = []*pb.Question{{Options: []*pb.Option{a, b}}}
			}
			n := Notice{Event: hub.Event{Kind: hub.Asked, Token: tokA, At: time.Now(),
				Request: hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: c.text, Questions: qs}}, AnswerURL: "https://aa.example/push/answer", Cap: "c"}
			if err := (&Ntfy{URL: ntfy.URL, Topic: "t"}).Send(context.Background(), n); err != nil {
				t.Fatal(err)
			}
			_, bodies := ntfy.waitFor(t, 1)
			var m ntfyMessage
			if err := json.Unmarshal(bodies[0], &m); err != nil {
				t.Fatal(err)
			}
			if m.Markdown != c.markdown {
				t.Errorf("markdown %v, want %v: %q", m.Markdown, c.markdown, m.Message)
			}
			for _, w := range c.want {
				if !strings.Contains(m.Message, w) {
					t.Errorf("the message %q lacks %q", m.Message, w)
				}
			}
			if m.Markdown && ntfyDisguises(m.Message) {
				t.Errorf("the markdown sent disguises a link: %q", m.Message)
			}
			if !m.Markdown && c.desc == "" {
				if l := mdLink.FindString(m.Message); l != "" {
					t.Errorf("the plain message keeps the link %q", l)
				}
				if strings.Contains(m.Message, "javascript:") {
					t.Errorf("the message shows javascript: %q", m.Message)
				}
			}
		})
	}
}
