package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// startServerConfig runs agentassistant-srv with the TOML config given
// (tokens are added): the -config given last is the one read.
func startServerConfig(t *testing.T, config string, tokens ...string) *server {
	t.Helper()
	return startServerConfigOn(t, "0", config, tokens...)
}

// startServerConfigOn is startServerConfig listening on port: a config
// may name its address (public_url).
func startServerConfigOn(t *testing.T, port, config string, tokens ...string) *server {
	t.Helper()
	data := t.TempDir()
	path := filepath.Join(data, "channels.toml")
	quoted := make([]string, len(tokens))
	for i, tok := range tokens {
		quoted[i] = fmt.Sprintf("%q", tok)
	}
	if err := os.WriteFile(path, []byte(fmt.Sprintf("tokens = [%s]\n%s", strings.Join(quoted, ","), config)), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServerWith(t, port, data, []string{"-config", path}, tokens...)
}

// appInbox is an inbox of token on s, logged in as this project's web
// UI does: it shows options as buttons, so a question's text is given
// as asked, and its options with it.
func appInbox(t *testing.T, s *server, token string) *wstest.Client {
	t.Helper()
	inbox, err := wstest.Connect(nil, s.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inbox.Close() })
	inbox.ShowsOptions = true
	if err := inbox.LogIn(token, "pc", "", 0); err != nil || !inbox.Login.GetSuccess() {
		t.Fatalf("login: %v %v", err, inbox.Login)
	}
	return inbox
}

// officialMCP starts agentassistant-mcp for token against s under the
// official MCP Go SDK's client (a client with no form elicitation: the
// question goes to the person).
func officialMCP(t *testing.T, s *server, token string) *sdk.ClientSession {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "agentassistant-mcp"), "-host", s.Host, "-port", s.Port, "-token", token)
	cmd.Env = []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home, "PATH=" + os.Getenv("PATH")}
	cmd.Dir = home
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e-official-sdk", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	session, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect the official MCP client: %v", err)
	}
	t.Cleanup(func() { _ = session.Close() })
	return session
}

// chatsServer starts Telegram's double (the bot tgToken, the chat 42),
// Slack's (the bot slBot and app slApp, the user U42), and a server of
// tokenA sending its questions to both.
func chatsServer(t *testing.T, tgToken, slBot, slApp string) (*telegramtest.API, *slacktest.API, *server) {
	t.Helper()
	tg := telegramtest.Start(t, tgToken)
	sl := slacktest.Start(t, slBot, slApp)
	return tg, sl, startServerConfig(t, fmt.Sprintf(`
[channels.telegram]
bot_token = %q
chats = [42]
api_url = %q

[channels.slack]
bot_token = %q
app_token = %q
channel = "U42"
users = ["U42"]
api_url = %q
`, tgToken, tg.URL, slBot, slApp, sl.APIURL()), tokenA)
}

// next is c's next frame of cmd, skipping others.
func next(t *testing.T, c *wstest.Client, cmd string) *pb.WebsocketMessage {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := c.Next(time.Until(deadline))
		if err != nil {
			t.Fatalf("waiting for %s: %v", cmd, err)
		}
		if m.Cmd == cmd {
			return m
		}
	}
}

// TestOptionsAnsweredOnTelegram (issue #27): the official MCP SDK client
// asks with options; the Telegram double receives a message with the
// options as an inline keyboard and Slack a message with them as buttons;
// a tap on the second option answers; the MCP client gets the second
// option; the inbox is told it was answered on Telegram, with it; the
// Slack message is updated to say so, its buttons gone, and the Telegram
// message too. Neither bot's token shows in the log.
func TestOptionsAnsweredOnTelegram(t *testing.T) {
	const (
		tgToken = "123456:ABC-e2e-secret-bot-token"
		slBot   = "xoxb-e2e-secret-bot-token"
		slApp   = "xapp-1-A1-e2e-secret-app-token"
		chat    = 42
	)
	tg, sl, s := chatsServer(t, tgToken, slBot, slApp)
	inbox := appInbox(t, s, tokenA)
	agent := officialMCP(t, s, tokenA)

	options := []string{"PostgreSQL", "SQLite", "MySQL"}
	type result struct {
		r   *sdk.CallToolResult
		err error
	}
	done := make(chan result, 1)
	// The call ends with the test: the session's Close waits for the
	// calls in flight.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		var opts []map[string]any
		for _, o := range options {
			opts = append(opts, map[string]any{"label": o})
		}
		r, err := agent.CallTool(ctx, &sdk.CallToolParams{Name: "ask_question", Arguments: map[string]any{
			"question": "Which **database**?", "project_directory": "/src/shop", "agent_name": "Claude Code", "options": opts,
		}})
		done <- result{r, err}
	}()

	q := next(t, inbox, "AskQuestion").GetAskQuestionRequest()
	if q.GetRequest().GetQuestion() != "Which **database**?" {
		t.Fatalf("the inbox has %v", q)
	}

	sent := tg.Call(t, "sendMessage", 1)
	kb, err := telegramtest.KeyboardOf(sent)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, row := range kb.InlineKeyboard {
		for _, b := range row {
			labels = append(labels, b.Text)
		}
	}
	if sent["chat_id"] != fmt.Sprint(chat) || !strings.Contains(sent["text"], "Which <b>database</b>?") || !slices.Equal(labels, options) {
		t.Fatalf("Telegram got %q with the keyboard %q, want the options %q", sent["text"], labels, options)
	}
	posted := sl.Call(t, "chat.postMessage", 1)
	blocks, err := slacktest.BlocksOf(posted)
	if err != nil {
		t.Fatal(err)
	}
	if got := slacktest.Buttons(blocks); !slices.Equal(got, options) {
		t.Fatalf("Slack's buttons are %q, want the options %q", got, options)
	}

	// The tap on the second option. A tap is taken once the server has
	// noted the message's ID, just after Telegram answered its
	// sendMessage: a tap before that is told the button can no longer
	// answer, and is made again, as a person would.
	var msg int
	if _, err := fmt.Sscan(sent["sent_message_id"], &msg); err != nil {
		t.Fatal(err)
	}
	// The note is on disk (the data directory's) once the server says so.
	if !s.logw.waitFor(`msg="a question sent and noted" component=channels channel=telegram`, 10*time.Second) {
		t.Fatal("the question's message was never noted")
	}
	second := kb.InlineKeyboard[1][0].CallbackData
	for tap := 1; ; tap++ {
		tg.Push(telegramtest.Callback(chat, msg, second))
		told := tg.Call(t, "answerCallbackQuery", tap)["text"]
		if told == "Answered: SQLite" {
			break
		}
		if tap == 5 || !strings.Contains(told, "can no longer answer") {
			t.Fatalf("tap %d was told %q", tap, told)
		}
	}

	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the MCP client has no answer")
	}
	if res.err != nil || res.r.IsError {
		t.Fatalf("ask_question: %v %+v", res.err, res.r)
	}
	var texts []string
	for _, c := range res.r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	var structured struct {
		Answered bool     `json:"answered"`
		Chosen   []string `json:"chosen"`
	}
	b, _ := json.Marshal(res.r.StructuredContent)
	if err := json.Unmarshal(b, &structured); err != nil || !structured.Answered || !slices.Equal(structured.Chosen, []string{"SQLite"}) ||
		!strings.Contains(strings.Join(texts, "\n"), "SQLite") {
		t.Fatalf("the MCP client got %q, structured %s", texts, b)
	}

	n := next(t, inbox, "AskQuestionReplyNotification")
	if n.GetAskQuestionRequest().GetID() != q.GetID() || n.GetNickname() != "Telegram" ||
		n.GetAskQuestionResponse().GetContents()[0].GetText().GetText() != "SQLite" {
		t.Errorf("the inbox was told %v, want SQLite answered on Telegram", n)
	}

	upd := sl.Call(t, "chat.update", 1)
	if blocks, err = slacktest.BlocksOf(upd); err != nil || upd["ts"] != posted["_ts"] || upd["channel"] != slacktest.DM("U42") ||
		len(blocks) != 1 || !strings.HasSuffix(blocks[0].Text.Text, "Answered on Telegram: SQLite") {
		t.Errorf("the Slack message was updated %v (%v)", upd, err)
	}
	edit := tg.Call(t, "editMessageText", 1)
	if edit["message_id"] != fmt.Sprint(msg) || !strings.HasSuffix(edit["text"], "Answered on Telegram: SQLite") ||
		!strings.Contains(edit["reply_markup"], `"inline_keyboard":[]`) {
		t.Errorf("the Telegram message was edited %v", edit)
	}
	for _, secret := range []string{tgToken, slBot, slApp} {
		if strings.Contains(s.logw.String(), secret) {
			t.Errorf("the server log holds a bot's token")
		}
	}
}
