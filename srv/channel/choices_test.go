package channel

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

var offered = []*pb.Question{{Options: []*pb.Option{{Label: "Continue"}, {Label: "Stop"}, {Label: "Run the tests again"}, {Label: "Ship it"}}}}

// askChoices asks token's room a task report offering the options above.
func (f *fixture) askChoices(token, id string) chan *hub.Reply {
	out := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := f.hub.Ask(context.Background(), token, hub.Request{Kind: wire.TaskFinish, ID: id, Text: "Done.",
			ProjectDirectory: "/srv/shop", AgentName: "Claude Code", Timeout: time.Hour, Questions: offered})
		out <- rep
	}()
	return out
}

// TestNtfyOffersTheOptions: ntfy's actions are the request's options
// (the first three), not the quick replies.
func TestNtfyOffersTheOptions(t *testing.T) {
	ntfy := newReceiver(t)
	f := newFixture(t, map[string][]Channel{tokA: {&Ntfy{URL: ntfy.URL, Topic: "aa-secret-topic"}}}, Options{})
	f.askChoices(tokA, "r-1")
	_, bodies := ntfy.waitFor(t, 1)
	var m ntfyMessage
	if err := json.Unmarshal(bodies[0], &m); err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, a := range m.Actions {
		labels = append(labels, a.Label)
	}
	if strings.Join(labels, "|") != "Continue|Stop|Run the tests again" || !strings.Contains(m.Actions[2].Body, `"text":"Run the tests again"`) {
		t.Errorf("actions %+v", m.Actions)
	}
}

// TestTelegramOffersTheOptions: the keyboard has a row per option, and a
// tap answers with that option's label.
func TestTelegramOffersTheOptions(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	answered := f.askChoices(tokA, "r-1")
	sent := api.Call(t, "sendMessage", 1)
	kb, err := telegramtest.KeyboardOf(sent)
	if err != nil || len(kb.InlineKeyboard) != 4 || kb.InlineKeyboard[3][0].Text != "Ship it" {
		t.Fatalf("keyboard %s: %v", sent["reply_markup"], err)
	}
	eventually(t, "noted what the message's buttons say", func() bool { return tg.tracks(sentKey{42, 101}) })
	api.Push(telegramtest.Callback(42, 101, kb.InlineKeyboard[3][0].CallbackData))
	if got := api.Call(t, "answerCallbackQuery", 1); got["text"] != "Answered: Ship it" {
		t.Errorf("the tap: %v", got)
	}
	if rep := answer(t, answered); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it" {
		t.Fatalf("the agent got %+v", rep)
	}
}

// TestSlackOffersTheOptions: the message's buttons are the request's
// options, not the quick replies, and a press answers with that option's
// label.
func TestSlackOffersTheOptions(t *testing.T) {
	const botToken, appToken = "xoxb-3-secret-bot-token", "xapp-3-A1-secret-app-token"
	api := slacktest.Start(t, botToken, appToken)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
	answered := f.askChoices(tokA, "r-1")
	sent := api.Call(t, "chat.postMessage", 1)
	blocks, err := slacktest.BlocksOf(sent)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(slacktest.Buttons(blocks), "|"); got != "Continue|Stop|Run the tests again|Ship it" {
		t.Fatalf("buttons %q, want the options", got)
	}
	ship := blocks[1].Elements[3].Value
	if strings.Contains(ship, "Ship") {
		t.Errorf("a button's value %q carries its label: the server answers with what it offered, by index", ship)
	}
	ts := sent["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{"D42", ts}); return ok })
	api.Envelope(t, "interactive", slacktest.Press("U42", "D42", ts, ship))
	if rep := answer(t, answered); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it" || rep.Door != "slack" {
		t.Fatalf("the agent got %+v", rep)
	}
}

// TestAnswersOutsideTheOptions: a question offering options without
// allow_other takes no typed answer through a channel either: a signed
// webhook answer of free text is refused (400, naming the options), an
// ntfy button's capability posted with free text too (400, the
// capability kept); an option then answers.
func TestAnswersOutsideTheOptions(t *testing.T) {
	recv := newReceiver(t)
	hook := &Webhook{ID: "n8n", URL: recv.URL, Secret: "s3cret", Token: tokA}
	f := newFixture(t, map[string][]Channel{tokA: {hook}}, Options{})
	answered := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := f.hub.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?", Timeout: time.Hour,
			Questions: []*pb.Question{{Options: []*pb.Option{{Label: "Deploy"}, {Label: "Wait"}}}}})
		answered <- rep
	}()
	_, bodies := recv.waitFor(t, 1)
	var e webhookEvent
	if err := json.Unmarshal(bodies[0], &e); err != nil || e.Answer == nil || e.Answer.Cap == "" {
		t.Fatalf("event %s", bodies[0])
	}
	post := func(path, body string, signed bool) (int, string) {
		req, _ := http.NewRequest("POST", f.public.URL+path, strings.NewReader(body))
		if signed {
			ts := time.Now().Unix()
			req.Header.Set(TimestampHeader, strconv.FormatInt(ts, 10))
			req.Header.Set(SignatureHeader, sign("s3cret", ts, []byte(body)))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(e.Answer.Signed, `{"id":"q-1","text":"drop the database"}`, true); code != http.StatusBadRequest || !strings.Contains(body, `"Deploy", "Wait"`) {
		t.Errorf("a signed typed answer: %d %s, want 400 naming the options", code, body)
	}
	if code, body := post("/push/answer", `{"cap":"`+e.Answer.Cap+`","text":"drop the database"}`, false); code != http.StatusBadRequest {
		t.Errorf("a capability with a typed answer: %d %s, want 400", code, body)
	}
	if code, body := post("/push/answer", `{"cap":"`+e.Answer.Cap+`","text":"Wait"}`, false); code != http.StatusOK {
		t.Fatalf("the capability with an option: %d %s", code, body)
	}
	if rep := answer(t, answered); rep == nil || rep.Contents[0].GetText().GetText() != "Wait" {
		t.Fatalf("the agent got %+v", rep)
	}
}
