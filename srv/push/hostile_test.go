package push

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// family is one grapheme of five runes (three emoji joined by U+200D):
// a cut inside it shows a person on their own, or a broken glyph.
const family = "👨\u200d👩\u200d👧"

// TestHostileQuestionFitsAPushWhole: a question whose every part holds
// what a push may not carry as is (thousands of graphemes of five runes,
// bidirectional overrides, zero-width characters, line breaks, what JSON
// writes in six bytes) goes out as one push of at most 4,096 bytes,
// encrypted, that the device opens (npm's http_ece); its title and body
// are cut between two graphemes, never inside one; its title is one
// line with no bidirectional control; its actions are the options as
// they are; and nowhere the token.
func TestHostileQuestionFitsAPushWhole(t *testing.T) {
	f := newFixture(t, Options{})
	d := newDevice(t, "/d")
	d.subscribe(t, f.p, f.s, tokA, "phone")
	opts := []*pb.Option{{Label: "Yes " + family}, {Label: "yes"}, {Label: "YES\u200b"}}
	go func() {
		_, _ = f.hub.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1",
			Text:             "\u202e<b>Deploy</b>\r\n\x01" + strings.Repeat(family, 5000),
			ProjectDirectory: "/src/\u202eshop\r\n" + strings.Repeat(family, 10),
			AgentName:        "Bot\u202e\u2066\r\nX-Injected: 1\u2028" + strings.Repeat(family, 20),
			Questions:        []*pb.Question{{Options: opts}}, Timeout: time.Hour})
	}()
	r := f.s.waitFor(t, "/d", 1)[0]
	f.s.mu.Lock()
	size := len(f.s.bodies[r])
	f.s.mu.Unlock()
	if size > 4096 {
		t.Errorf("the push is %d bytes encrypted, more than a push service takes (4,096)", size)
	}
	got := d.open(t, f.s, r)
	if strings.Contains(got.raw, tokA) {
		t.Error("the push holds the token")
	}
	for name, s := range map[string]string{"title": got.msg.Title, "body": got.msg.Body} {
		cut, ok := strings.CutSuffix(s, "…")
		if !ok {
			t.Errorf("the %s is not marked cut: %q", name, s)
			continue
		}
		if !strings.HasSuffix(cut, family) {
			t.Errorf("the %s is cut inside a grapheme: …%q", name, cut[max(0, len(cut)-40):])
		}
	}
	if strings.ContainsFunc(got.msg.Title, func(r rune) bool {
		return unicode.IsControl(r) || unicode.In(r, unicode.Bidi_Control, unicode.Zl, unicode.Zp)
	}) {
		t.Errorf("the title %q breaks its line or turns it around", got.msg.Title)
	}
	if len(got.msg.Actions) != len(opts) {
		t.Fatalf("actions %q, want the options", got.msg.Actions)
	}
	for i, a := range got.msg.Actions {
		if a != opts[i].GetLabel() {
			t.Errorf("action %d is %q, want the option's label %q", i, a, opts[i].GetLabel())
		}
	}
}
