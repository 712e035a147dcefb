package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
	tg, sl, s := chatsServer(t, tgToken, slBot, slApp)
	inbox := appInbox(t, s, tokenA)
	agent := officialMCP(t, s, tokenA)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ask := func() (string, <-chan []string) {
		done := askSeveral(ctx, agent, "Which platforms?")
		return next(t, inbox, "AskQuestion").GetAskQuestionRequest().GetID(), done
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
	if c := chosenOf(t, done); !slices.Equal(c, []string{"Web", "Desktop"}) {
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
	if c := chosenOf(t, done); !slices.Equal(c, []string{"Mobile", "Desktop"}) {
		t.Fatalf("the agent chose %q on Slack, want Mobile and Desktop", c)
	}
	for _, secret := range []string{tgToken, slBot, slApp} {
		if strings.Contains(s.logw.String(), secret) {
			t.Errorf("the server log holds a bot's token")
		}
	}
}

// askSeveral has agent ask question, taking several of Web, Mobile and
// Desktop and nothing else; the options chosen come on the channel (an
// error's text, when the call fails).
func askSeveral(ctx context.Context, agent *sdk.ClientSession, question string) <-chan []string {
	done := make(chan []string, 1)
	go func() {
		r, err := agent.CallTool(ctx, &sdk.CallToolParams{Name: "ask_question", Arguments: map[string]any{
			"question": question, "multi_select": true, "allow_other": false,
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
	return done
}

// chosenOf is what askSeveral's done brings; t fails when it brings
// nothing within 10 s.
func chosenOf(t *testing.T, done <-chan []string) []string {
	t.Helper()
	select {
	case c := <-done:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("the MCP client has no answer")
		return nil
	}
}

// TestSeveralAnsweredOnNtfyEmailAndWebhook: the official MCP SDK
// client asks three questions with multi_select, each answered on
// another channel, two options picked each time, and the agent gets
// exactly those. ntfy's notification lists the options with one button,
// which opens the question in the app (public_url), where the person
// ticks two; the mail numbers them and the person replies with two
// numbers; the webhook's asked event names them and its receiver posts
// two, signed.
func TestSeveralAnsweredOnNtfyEmailAndWebhook(t *testing.T) {
	const secret = "an-e2e-webhook-secret-several"
	nt := startNtfy(t)
	sink, box := startMailSink(t), startMailbox(t)
	recv, events := startHookReceiver(t)
	port := freePort(t)
	public := "http://127.0.0.1:" + port
	s := startServerConfigOn(t, port, fmt.Sprintf(`[channels]
public_url = %q

[channels.ntfy]
url = %q
topic = "aa-several"

[channels.webhook]
id = "n8n"
url = %q
secret = %q

`, public, nt.URL, recv.URL, secret)+emailConfig(sink, box), tokenA)
	inbox := appInbox(t, s, tokenA)
	agent := officialMCP(t, s, tokenA)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	// ntfy: the button opens the question in the app.
	done := askSeveral(ctx, agent, "Which platforms, on ntfy?")
	id := next(t, inbox, "AskQuestion").GetAskQuestionRequest().GetID()
	m := nt.published(t, 1)
	acts, _ := m["actions"].([]any)
	if len(acts) != 1 {
		t.Fatalf("ntfy's actions %v, want one opening the app", acts)
	}
	if a := acts[0].(map[string]any); a["action"] != "view" || a["url"] != public+"/?request="+url.QueryEscape(id) {
		t.Fatalf("ntfy's action %v, want a view of %s/?request=%s", a, public, id)
	}
	if msg, _ := m["message"].(string); !strings.Contains(msg, "- Web\n- Mobile\n- Desktop") {
		t.Errorf("ntfy's message %q, want the options listed", msg)
	}
	if err := inbox.Send(wstest.TextReply(id, "Web", "Desktop")); err != nil {
		t.Fatal(err)
	}
	if c := chosenOf(t, done); !slices.Equal(c, []string{"Web", "Desktop"}) {
		t.Fatalf("the agent chose %q in the app opened from ntfy, want Web and Desktop", c)
	}

	// E-mail: a reply naming two of the numbered options.
	done = askSeveral(ctx, agent, "Which platforms, by mail?")
	mail := sink.question(t, "Which platforms, by mail?")
	b, err := io.ReadAll(mail.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "1. Web") || !strings.Contains(string(b), "3. Desktop") {
		t.Fatalf("the mail:\n%s\nwant the options numbered", b)
	}
	box.deliver(t, replyTo(1, messageID(mail), "3, 2"))
	if c := chosenOf(t, done); !slices.Equal(c, []string{"Mobile", "Desktop"}) {
		t.Fatalf("the agent chose %q by mail, want Mobile and Desktop", c)
	}

	// Webhook: its receiver posts two, signed.
	done = askSeveral(ctx, agent, "Which platforms, by webhook?")
	asked := askedEvent(t, events, "Which platforms, by webhook?")
	if opts, _ := asked["options"].([]any); len(opts) != 3 || asked["multi_select"] != true {
		t.Fatalf("the asked event %v, want its three options and multi_select", asked)
	}
	signed, _ := asked["answer"].(map[string]any)["signed"].(string)
	if code, msg := postSigned(t, s.URL+signed, secret, fmt.Sprintf(`{"id":%q,"texts":["Web","Mobile"],"by":"n8n"}`, asked["id"])); code != http.StatusOK {
		t.Fatalf("the signed answer: %d %s", code, msg)
	}
	if c := chosenOf(t, done); !slices.Equal(c, []string{"Web", "Mobile"}) {
		t.Fatalf("the agent chose %q through the webhook, want Web and Mobile", c)
	}
	for _, m := range sink.said("Not taken") {
		t.Errorf("the person was mailed %q", m)
	}
	for _, secret := range []string{secret, mailPass} {
		if strings.Contains(s.logw.String(), secret) {
			t.Errorf("the server log holds a secret")
		}
	}
}
