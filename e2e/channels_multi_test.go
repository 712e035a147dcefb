package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// TestSeveralAnsweredOnTelegramAndSlack: the official MCP SDK client
// asks a question with multi_select; on Telegram two boxes are ticked
// and Send tapped, and the agent gets those two options, as the inbox
// would send them. A second such question is answered on Slack: two
// boxes ticked, then Send, and the agent gets those.
func TestSeveralAnsweredOnTelegramAndSlack(t *testing.T) {
	const (
		tgToken = "123456:ABC-e2e-secret-bot-token"
		slBot   = "xoxb-e2e-secret-bot-token"
		slApp   = "xapp-1-A1-e2e-secret-app-token"
		chat    = 42
	)
	tg := telegramtest.Start(t, tgToken)
	sl := slacktest.Start(t, slBot, slApp)
	s := startServerConfig(t, fmt.Sprintf(`
[channels.telegram]
bot_token = %q
chats = [%d]
api_url = %q

[channels.slack]
bot_token = %q
app_token = %q
channel = "U42"
users = ["U42"]
api_url = %q
`, tgToken, chat, tg.URL, slBot, slApp, sl.APIURL()), tokenA)
	inbox, err := wstest.Connect(nil, s.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inbox.Close() })
	inbox.ShowsOptions = true
	if err := inbox.LogIn(tokenA, "pc", "", 0); err != nil || !inbox.Login.GetSuccess() {
		t.Fatalf("login: %v %v", err, inbox.Login)
	}
	agent := officialMCP(t, s, tokenA)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ask := func() (string, <-chan []string) {
		done := make(chan []string, 1)
		go func() {
			r, err := agent.CallTool(ctx, &sdk.CallToolParams{Name: "ask_question", Arguments: map[string]any{
				"question": "Which platforms?", "multi_select": true, "allow_other": false,
				"options": []map[string]any{{"label": "Web"}, {"label": "Mobile"}, {"label": "Desktop"}},
			}})
			if err != nil || r.IsError {
				done <- []string{fmt.Sprintf("error %v %+v", err, r)}
				return
			}
			var structured struct {
				Chosen []string `json:"chosen"`
			}
			b, _ := json.Marshal(r.StructuredContent)
			_ = json.Unmarshal(b, &structured)
			done <- structured.Chosen
		}()
		return next(t, inbox, "AskQuestion").GetAskQuestionRequest().GetID(), done
	}
	got := func(done <-chan []string) []string {
		select {
		case c := <-done:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("the MCP client has no answer")
			return nil
		}
	}
	noted := func(channel, id string) {
		t.Helper()
		if !s.logw.waitFor(`msg="a question sent and noted" component=channels channel=`+channel+` id=`+id, 10*time.Second) {
			t.Fatalf("the question's %s message was never noted", channel)
		}
	}

	id, done := ask()
	sent := tg.Call(t, "sendMessage", 1)
	kb, err := telegramtest.KeyboardOf(sent)
	if err != nil || len(kb.InlineKeyboard) != 4 {
		t.Fatalf("keyboard %s: %v", sent["reply_markup"], err)
	}
	var msg int
	if _, err := fmt.Sscan(sent["sent_message_id"], &msg); err != nil {
		t.Fatal(err)
	}
	noted("telegram", id)
	tg.Push(telegramtest.Callback(chat, msg, kb.InlineKeyboard[2][0].CallbackData))
	tg.Call(t, "editMessageReplyMarkup", 1)
	tg.Push(telegramtest.Callback(chat, msg, kb.InlineKeyboard[0][0].CallbackData))
	tg.Call(t, "editMessageReplyMarkup", 2)
	tg.Push(telegramtest.Callback(chat, msg, kb.InlineKeyboard[3][0].CallbackData))
	if told := tg.Call(t, "answerCallbackQuery", 3)["text"]; told != "Answered: Web, Desktop" {
		t.Errorf("Send was told %q", told)
	}
	if c := got(done); !slices.Equal(c, []string{"Web", "Desktop"}) {
		t.Fatalf("the agent chose %q on Telegram, want Web and Desktop", c)
	}

	id, done = ask()
	posted := sl.Call(t, "chat.postMessage", 2)
	blocks, err := slacktest.BlocksOf(posted)
	if err != nil || len(blocks) < 2 || len(blocks[1].Elements) != 2 {
		t.Fatalf("Slack's blocks %s: %v", posted["blocks"], err)
	}
	boxes, send := blocks[1].Elements[0].Options, blocks[1].Elements[1].Value
	noted("slack", id)
	sl.Envelope(t, "interactive", slacktest.Tick("U42", slacktest.DM("U42"), posted["_ts"], "answers", "ticks", boxes[1].Value))
	sl.Envelope(t, "interactive", slacktest.PressIn("U42", slacktest.DM("U42"), posted["_ts"], send,
		slacktest.Ticked("answers", "ticks", boxes[1].Value, boxes[2].Value)))
	if c := got(done); !slices.Equal(c, []string{"Mobile", "Desktop"}) {
		t.Fatalf("the agent chose %q on Slack, want Mobile and Desktop", c)
	}
	for _, secret := range []string{tgToken, slBot, slApp} {
		if strings.Contains(s.logw.String(), secret) {
			t.Errorf("the server log holds a bot's token")
		}
	}
}
