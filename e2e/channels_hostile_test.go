package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// TestHostileQuestionOnChats: an agent asks, through agentassistant-mcp,
// the longest question it may, with ten options as long as they may be,
// everything full of what Telegram's HTML and Slack's mrkdwn would read
// as their own (tags, a javascript: link, <!channel>, a user, a user
// group, a link whose text names another place). Telegram and Slack
// take the message (neither double, which refuses what the services
// refuse, says otherwise), and again once the question is withdrawn;
// no mention, no javascript: link, and no link disguised by its text
// reaches the person.
func TestHostileQuestionOnChats(t *testing.T) {
	const (
		tgToken = "123456:ABC-e2e-hostile-bot-token"
		slBot   = "xoxb-e2e-hostile-bot-token"
		slApp   = "xapp-1-A1-e2e-hostile-app-token"
	)
	tg, sl, s := chatsServer(t, tgToken, slBot, slApp)
	agent := officialMCP(t, s, tokenA)

	injections := "<!channel> <!here> <@U123> <!subteam^S1|@ops> <http://evil.example|innocent> " +
		"\u202e<!channel>\u202c \u200b<@U123> </b><a href=\"javascript:alert(1)\">x</a> &amp; &#0; " +
		"[bank.example](https://evil.example/login) [ok](javascript:alert(1)) ![x](javascript:alert(1))\n\n"
	question := "# Plan\n\n" + strings.Repeat(injections, 40) + strings.Repeat("> ", 500) + "deep"
	var opts []map[string]any
	for i := range 10 {
		opts = append(opts, map[string]any{"label": fmt.Sprintf("%d <!channel> <@U1> </b>", i) + strings.Repeat("&", 55),
			"description": strings.Repeat("<!here> &lt;", 14) + "<a href=\"javascript:x\">"})
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() {
		r, err := agent.CallTool(ctx, &sdk.CallToolParams{Name: "ask_question", Arguments: map[string]any{
			"question": question, "project_directory": "/src/\u202e<!channel>&</b>", "agent_name": strings.Repeat("<!here>&", 16), "options": opts,
		}})
		if err == nil && r.IsError {
			err = fmt.Errorf("ask_question: %v", r.Content[0].(*sdk.TextContent).Text)
		}
		done <- err
	}()

	var sent map[string]string
	select {
	case err := <-done:
		t.Fatalf("the agent's question ended: %v", err)
	case c := <-callOf(ctx, tg.WaitFor, "sendMessage"):
		sent = c
	}
	if sent["_error"] != "" {
		t.Fatalf("Telegram refused the question: %s", sent["_error"])
	}
	if strings.Contains(sent["text"], "javascript:") && strings.Contains(sent["text"], `href="javascript`) {
		t.Errorf("Telegram's message links javascript:")
	}
	posted := sl.Call(t, "chat.postMessage", 1)
	if posted["_error"] != "" {
		t.Fatalf("Slack refused the question: %s", posted["_error"])
	}
	blocks, err := slacktest.BlocksOf(posted)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if b.Text != nil {
			checkSlackText(t, b.Text.Text)
		}
	}
	checkSlackText(t, posted["text"])

	cancel() // the agent gives up: the question is withdrawn
	<-done
	if c := tg.Call(t, "editMessageText", 1); c["_error"] != "" {
		t.Errorf("Telegram refused the withdrawn question: %s", c["_error"])
	}
	if c := sl.Call(t, "chat.update", 1); c["_error"] != "" {
		t.Errorf("Slack refused the withdrawn question: %s", c["_error"])
	}
}

// slackLink is a link in mrkdwn, <address|text> or <address>.
var slackLink = regexp.MustCompile(`<([^<>|]*)(?:\|([^<>]*))?>`)

// checkSlackText: text mentions no one and links only to http(s) and
// mailto addresses, each link's text naming no other place.
func checkSlackText(t *testing.T, text string) {
	t.Helper()
	for _, m := range slackLink.FindAllStringSubmatch(text, -1) {
		addr, label := m[1], m[2]
		switch {
		case !strings.HasPrefix(addr, "http://") && !strings.HasPrefix(addr, "https://") && !strings.HasPrefix(addr, "mailto:"):
			t.Errorf("Slack reads %q as a mention or a link of its own", m[0])
		case strings.Contains(label, "example") && !strings.Contains(addr, label):
			t.Errorf("Slack shows the link %q", m[0])
		}
	}
}

// callOf is the form of the first call of method, once it came (within
// ctx, which ends the goroutine waiting for it).
func callOf(ctx context.Context, wait func(context.Context, func([]telegramtest.Call) bool) error, method string) <-chan map[string]string {
	out := make(chan map[string]string, 1)
	go func() {
		_ = wait(ctx, func(cs []telegramtest.Call) bool {
			for _, c := range cs {
				if c.Method == method {
					out <- c.Form
					return true
				}
			}
			return false
		})
	}()
	return out
}
