package channel

import (
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/slacktest"
)

// TestSlackReplyReadsAsTyped: Slack hands a message's text in its own
// format (docs.slack.dev/messaging/formatting-message-text): the &, <
// and > a person typed as &amp;, &lt; and &gt;, and a mention, a
// channel or an address as <@U…>, <#C…|name>, <https://…|text>. A reply
// in a question's thread reaches the agent as the person wrote it, and
// a reply naming an option with an & in its label is that option, not
// a typed answer the question refuses.
func TestSlackReplyReadsAsTyped(t *testing.T) {
	const botToken, appToken = "xoxb-13-secret-bot-token", "xapp-13-A1-secret-app-token"
	api := slacktest.Start(t, botToken, appToken)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
	const dm = "D42"

	free := f.askText(tokA, "q-1", "Deploy now?", nil)
	ts := api.Call(t, "chat.postMessage", 1)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts}); return ok })
	api.Envelope(t, "events_api", slacktest.ThreadReply("U42", dm, ts,
		"Only if a &lt; b &amp;&amp; c &gt; d: ask <@U0ANA>, read <https://example.com/run?a=1&amp;b=2|the runbook> in <#C0OPS|ops>, <https://example.com/x>"))
	want := "Only if a < b && c > d: ask @U0ANA, read the runbook (https://example.com/run?a=1&b=2) in #ops, https://example.com/x"
	if rep := answer(t, free); rep == nil || rep.Contents[0].GetText().GetText() != want {
		t.Errorf("the agent got %v, want %q", rep, want)
	}

	only := []*pb.Question{{Options: []*pb.Option{{Label: "Tom & Jerry"}, {Label: "<none>"}}}}
	chosen := f.askText(tokA, "q-2", "Which?", only)
	ts2 := api.Call(t, "chat.postMessage", 2)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts2}); return ok })
	api.Envelope(t, "events_api", slacktest.ThreadReply("U42", dm, ts2, "Tom &amp; Jerry"))
	if rep := answer(t, chosen); rep == nil || rep.Contents[0].GetText().GetText() != "Tom & Jerry" {
		t.Errorf("the agent got %v, want the option Tom & Jerry", rep)
	}
}
