package channel

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/slacktest"
)

// TestArabicQuestionReadsAsWritten: a question in Arabic, from a project
// with an English name, with three options, as Slack and ntfy show it:
// the English title on a line of its own, the question as written, then
// each option on its own line ("label — description", so that a client
// setting each line by its first letter sets it right to left whole),
// in the given order, and the buttons named by the labels. Nothing adds
// a direction mark a client would show, or that would turn a line.
func TestArabicQuestionReadsAsWritten(t *testing.T) {
	const botToken, appToken = "xoxb-1-secret-bot-token", "xapp-1-A1-secret-app-token"
	api := slacktest.Start(t, botToken, appToken)
	ntfy := newReceiver(t)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {sl, &Ntfy{URL: ntfy.URL, Topic: "aa-topic"}}}, Options{})
	labels := []string{"نشر الآن", "بعد المراجعة", "إلغاء"}
	qs := []*pb.Question{{Options: []*pb.Option{
		{Label: labels[0], Description: "ننشر الإصدار v2 على كل الخوادم"},
		{Label: labels[1], Description: "ننتظر مراجعة الكود أولاً"},
		{Label: labels[2]},
	}}}
	f.askText(tokA, "q-1", "هل ننشر الإصدار **v2** من `billing-api` الآن؟", qs)
	options := []string{labels[0] + " — ننشر الإصدار v2 على كل الخوادم", labels[1] + " — ننتظر مراجعة الكود أولاً", labels[2]}
	bidi := func(s string) bool {
		return strings.ContainsFunc(s, func(r rune) bool { return unicode.Is(unicode.Bidi_Control, r) })
	}

	sent := api.Call(t, "chat.postMessage", 1)
	blocks, err := slacktest.BlocksOf(sent)
	if err != nil || len(blocks) != 2 {
		t.Fatalf("posted %v: %v", sent, err)
	}
	want := "shop · Claude Code asks\n\nهل ننشر الإصدار *v2* من `billing-api` الآن؟\n\n• " + strings.Join(options, "\n• ") +
		"\n\n(Press an answer, or reply in this message's thread.)"
	if got := blocks[0].Text.Text; got != want || bidi(got) || !strings.HasPrefix(sent["text"], "shop · Claude Code asks: ") {
		t.Errorf("slack: %q (text %q), want %q", got, sent["text"], want)
	}
	for i, e := range blocks[1].Elements {
		if i >= len(labels) || e.Text.Text != labels[i] {
			t.Errorf("slack button %d: %q, want %q", i, e.Text.Text, labels)
		}
	}

	_, bodies := ntfy.waitFor(t, 1)
	var m ntfyMessage
	if err := json.Unmarshal(bodies[0], &m); err != nil {
		t.Fatal(err)
	}
	want = "هل ننشر الإصدار **v2** من `billing-api` الآن؟\n\n- " + strings.Join(options, "\n- ")
	if m.Title != "shop · Claude Code asks" || m.Message != want || !m.Markdown || bidi(m.Message) {
		t.Errorf("ntfy: title %q, message %q (markdown %v), want %q", m.Title, m.Message, m.Markdown, want)
	}
	for i, a := range m.Actions {
		if i >= len(labels) || a.Label != labels[i] {
			t.Errorf("ntfy action %d: %q, want %q", i, a.Label, labels)
		}
	}
	if len(m.Actions) != len(labels) || len(blocks[1].Elements) != len(labels) {
		t.Errorf("%d ntfy actions, %d slack buttons, want %d", len(m.Actions), len(blocks[1].Elements), len(labels))
	}
}
