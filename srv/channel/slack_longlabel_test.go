package channel

import (
	"strings"
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestSlackLongLabelsAreShownWhole: a button holds 75 characters (Block
// Kit), so two labels of up to 80 bytes differing only at their end
// would be two buttons that read the same, the person pressing one
// blind. When a label is cut on its button the message lists every
// option whole above the buttons, as it does those with descriptions.
func TestSlackLongLabelsAreShownWhole(t *testing.T) {
	const botToken, appToken = "xoxb-14-secret-bot-token", "xapp-14-A1-secret-app-token"
	api := slacktest.Start(t, botToken, appToken)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
	stem := strings.Repeat("Run the migration on production tonight, then ", 2)[:wire.MaxLabelBytes-5]
	keep, drop := stem+" keep", stem+" drop"
	for i, multi := range []bool{false, true} {
		f.askText(tokA, "q-"+string(rune('1'+i)), "Which?", []*pb.Question{{Options: []*pb.Option{{Label: keep}, {Label: drop}}, Multiple: multi}})
		blocks, err := slacktest.BlocksOf(api.Call(t, "chat.postMessage", i+1))
		if err != nil || len(blocks) == 0 || blocks[0].Text == nil {
			t.Fatalf("posted %v: %v", blocks, err)
		}
		if text := blocks[0].Text.Text; !strings.Contains(text, "• "+keep) || !strings.Contains(text, "• "+drop) {
			t.Errorf("multi %v: the message reads %q, without both options whole", multi, text)
		}
	}
}
