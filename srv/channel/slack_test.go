package channel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// slackAPI is a double of Slack's Web API and Socket Mode, written from
// their documentation (https://docs.slack.dev/apis/events-api/using-socket-mode,
// https://docs.slack.dev/reference/methods/apps.connections.open,
// chat.postMessage, chat.update, chat.postEphemeral): a method is POST
// /api/<method>, its token in the form's "token" or an "Authorization:
// Bearer" header, answered {"ok": true, ...} or {"ok": false, "error":
// ...}; apps.connections.open, with the app-level token, answers the
// WebSocket URL to dial, where the app is greeted {"type": "hello"} and
// then sent envelopes ({"envelope_id", "type": "events_api" |
// "interactive", "payload"}), each to be acknowledged by sending back
// {"envelope_id": ...}.
type slackAPI struct {
	*httptest.Server
	botToken, appToken string
	// refuse answers every method with an error that names the token
	// presented, as a misconfigured proxy might.
	refuse bool

	mu    sync.Mutex
	calls []botCall
	acks  []string
	conn  *websocket.Conn // the app's connection, once it dialled
	ts    int
	wake  chan struct{}
}

func newSlackAPI(t *testing.T, botToken, appToken string) *slackAPI {
	api := &slackAPI{botToken: botToken, appToken: appToken, ts: 100, wake: make(chan struct{}, 1000)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/{method}", api.method)
	mux.HandleFunc("GET /link/", api.socket)
	api.Server = httptest.NewServer(mux)
	t.Cleanup(func() {
		api.mu.Lock()
		if api.conn != nil {
			_ = api.conn.Close()
		}
		api.mu.Unlock()
		api.Close()
	})
	return api
}

func (api *slackAPI) method(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = r.ParseForm()
	form := map[string]string{}
	for k, v := range r.PostForm {
		form[k] = v[0]
	}
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if tok == "" {
		tok = form["token"]
	}
	method := r.PathValue("method")
	want := api.botToken
	if method == "apps.connections.open" {
		want = api.appToken
	}
	reply := func(v map[string]any) { _ = json.NewEncoder(w).Encode(v) }
	if api.refuse {
		reply(map[string]any{"ok": false, "error": "invalid_auth for " + tok})
		return
	}
	if tok != want {
		reply(map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	api.mu.Lock()
	api.ts++
	ts := "1700000000." + strconv.Itoa(api.ts)
	delete(form, "token")
	form["_ts"] = ts // what the call answered
	api.calls = append(api.calls, botCall{method, form})
	api.mu.Unlock()
	api.wake <- struct{}{}
	channel := form["channel"]
	if strings.HasPrefix(channel, "U") { // a user's DM with the app
		channel = "D" + channel[1:]
	}
	switch method {
	case "apps.connections.open":
		reply(map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(api.URL, "http") + "/link/?ticket=t-1&app_id=A1"})
	case "chat.postMessage":
		reply(map[string]any{"ok": true, "channel": channel, "ts": ts, "message": map[string]any{"type": "message", "text": form["text"], "ts": ts}})
	case "chat.update":
		reply(map[string]any{"ok": true, "channel": channel, "ts": form["ts"], "text": form["text"]})
	case "chat.postEphemeral":
		reply(map[string]any{"ok": true, "message_ts": ts})
	default:
		reply(map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// upgrader takes the app's dial (its Origin is https://api.slack.com).
var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (api *slackAPI) socket(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("ticket") != "t-1" {
		http.Error(w, "no such ticket", http.StatusUnauthorized)
		return
	}
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	api.mu.Lock()
	api.conn = c
	err = c.WriteJSON(map[string]any{"type": "hello", "num_connections": 1,
		"debug_info": map[string]any{"host": "applink-double", "approximate_connection_time": 18060}, "connection_info": map[string]any{"app_id": "A1"}})
	api.mu.Unlock()
	api.wake <- struct{}{}
	for err == nil {
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if err = c.ReadJSON(&ack); err == nil {
			api.mu.Lock()
			api.acks = append(api.acks, ack.EnvelopeID)
			api.mu.Unlock()
			api.wake <- struct{}{}
		}
	}
}

// await waits until ok, called with api.mu held, holds.
func (api *slackAPI) await(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		api.mu.Lock()
		done := ok()
		api.mu.Unlock()
		if done {
			return
		}
		select {
		case <-api.wake:
		case <-deadline:
			t.Fatalf("no %s", what)
		}
	}
}

// envelope sends an envelope of typ over the app's connection and waits
// for its acknowledgement.
func (api *slackAPI) envelope(t *testing.T, typ string, payload map[string]any) {
	t.Helper()
	api.await(t, "connection", func() bool { return api.conn != nil })
	api.mu.Lock()
	id := fmt.Sprintf("env-%d", len(api.acks)+len(api.calls)+api.ts)
	err := api.conn.WriteJSON(map[string]any{"envelope_id": id, "type": typ, "payload": payload, "accepts_response_payload": typ == "interactive", "retry_attempt": 0, "retry_reason": ""})
	api.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	api.await(t, "acknowledgement of "+id, func() bool {
		for _, a := range api.acks {
			if a == id {
				return true
			}
		}
		return false
	})
}

// waitCall waits for the n-th call of method and returns its form.
func (api *slackAPI) waitCall(t *testing.T, method string, n int) map[string]string {
	t.Helper()
	var form map[string]string
	api.await(t, method+" #"+strconv.Itoa(n), func() bool {
		seen := 0
		for _, c := range api.calls {
			if c.method == method {
				if seen++; seen == n {
					form = c.form
					return true
				}
			}
		}
		return false
	})
	return form
}

// press is a block_actions interaction: user pressed the button value
// of the message ts.
func press(user, channel, ts, value string) map[string]any {
	return map[string]any{"type": "block_actions", "user": map[string]any{"id": user, "username": "ana", "name": "ana", "team_id": "T1"},
		"api_app_id": "A1", "token": "verification", "trigger_id": "1.2.3",
		"container": map[string]any{"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false},
		"team":      map[string]any{"id": "T1", "domain": "example"}, "channel": map[string]any{"id": channel, "name": "directmessage"},
		"message": map[string]any{"type": "message", "ts": ts, "text": "…"},
		"actions": []any{map[string]any{"type": "button", "action_id": "answer-1", "block_id": "answers", "value": value,
			"text": map[string]any{"type": "plain_text", "text": "No"}, "action_ts": "1700000001.000001"}}}
}

// threadReply is an events_api message event: user replied in the
// thread of the message ts.
func threadReply(user, channel, ts, text string) map[string]any {
	return map[string]any{"token": "verification", "team_id": "T1", "api_app_id": "A1", "type": "event_callback", "event_id": "Ev1", "event_time": 1700000002,
		"event": map[string]any{"type": "message", "channel": channel, "user": user, "text": text, "ts": "1700000002.000100",
			"thread_ts": ts, "channel_type": "im", "event_ts": "1700000002.000100"}}
}

type slackBlocks []struct {
	Type string `json:"type"`
	Text *struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"text"`
	Elements []struct {
		Type  string `json:"type"`
		Value string `json:"value"`
		Text  struct {
			Text string `json:"text"`
		} `json:"text"`
	} `json:"elements"`
}

// TestSlack: a question goes to the configured DM as a Block Kit message
// with buttons, whose values are no capability; a stranger's press answers nothing (they are told so);
// a configured user's press answers with that button, and the message is
// updated to say the question is settled, without its buttons; a reply
// in a question's thread answers it with the reply's text, a stranger's
// does not. Every envelope is acknowledged.
func TestSlack(t *testing.T) {
	const botToken, appToken = "xoxb-1-secret-bot-token", "xapp-1-A1-secret-app-token"
	api := newSlackAPI(t, botToken, appToken)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.URL + "/api"}
	f := newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
	answered := f.ask(tokA, "q-1")
	sent := api.waitCall(t, "chat.postMessage", 1)
	var blocks slackBlocks
	if err := json.Unmarshal([]byte(sent["blocks"]), &blocks); err != nil || len(blocks) != 2 || sent["channel"] != "U42" {
		t.Fatalf("posted %v: %v", sent, err)
	}
	if blocks[0].Type != "section" || blocks[0].Text.Type != "plain_text" || !strings.HasPrefix(blocks[0].Text.Text, "shop · Claude Code asks\n\nDeploy **now**?") {
		t.Errorf("section %+v", blocks[0])
	}
	if blocks[1].Type != "actions" || len(blocks[1].Elements) != 3 || blocks[1].Elements[1].Type != "button" || blocks[1].Elements[1].Text.Text != "No" {
		t.Fatalf("actions %+v", blocks[1])
	}
	no, yes := blocks[1].Elements[1].Value, blocks[1].Elements[0].Value
	const dm = "D42"
	ts := sent["_ts"]

	// Anyone who can read the channel reads the buttons' values: they do
	// not answer at the server's public address.
	for part := range strings.SplitSeq(no, ":") {
		body, _ := json.Marshal(map[string]string{"cap": part, "text": "Yes"})
		resp, err := http.Post(f.public.URL+"/push/answer", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("a button's value %q answers at /push/answer", no)
		}
	}
	// A press can come only once the message is posted and its ts noted.
	eventually(t, "noted what the message asks", func() bool { _, ok := sl.question(slackKey{dm, ts}); return ok })
	api.envelope(t, "interactive", press("U99", dm, ts, no)) // a stranger
	if got := api.waitCall(t, "chat.postEphemeral", 1); got["user"] != "U99" || !strings.Contains(got["text"], "may not answer") {
		t.Errorf("the stranger was told %v", got)
	}
	api.envelope(t, "interactive", press("U42", dm, ts, no))
	if rep := answer(t, answered); rep == nil || rep.Contents[0].GetText().GetText() != "No" || rep.Door != "slack" {
		t.Fatalf("the agent got %+v", rep)
	}
	upd := api.waitCall(t, "chat.update", 1)
	blocks = nil
	if err := json.Unmarshal([]byte(upd["blocks"]), &blocks); err != nil || upd["channel"] != dm || upd["ts"] != ts || len(blocks) != 1 ||
		!strings.HasSuffix(blocks[0].Text.Text, "— shop · Answered on slack") {
		t.Errorf("update %v: %v", upd, err)
	}

	api.envelope(t, "interactive", press("U42", dm, ts, yes))
	if got := api.waitCall(t, "chat.postEphemeral", 2); got["user"] != "U42" || !strings.Contains(got["text"], "no longer pending") {
		t.Errorf("a press after the answer: %v", got)
	}

	second := f.ask(tokA, "q-2")
	ts2 := api.waitCall(t, "chat.postMessage", 2)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok := sl.question(slackKey{dm, ts2}); return ok })
	api.envelope(t, "events_api", threadReply("U99", dm, ts2, "Ship it.")) // a stranger
	api.envelope(t, "events_api", threadReply("U42", dm, ts2, "Wait for the review."))
	if rep := answer(t, second); rep == nil || rep.Contents[0].GetText().GetText() != "Wait for the review." || rep.Door != "slack" || rep.ClientID != "slack:U42" {
		t.Fatalf("the reply: %+v", rep)
	}
}

// TestSlackKeepsTokensSecret: when Slack's answers name the tokens, they
// appear neither in Send's error nor in the log of a refused connection.
func TestSlackKeepsTokensSecret(t *testing.T) {
	const botToken, appToken = "xoxb-2-secret-bot-token", "xapp-2-A1-secret-app-token"
	api := newSlackAPI(t, botToken, appToken)
	api.refuse = true
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "C1", Users: []string{"U42"}, APIURL: api.URL + "/api",
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	newFixture(t, map[string][]Channel{tokA: {sl}}, Options{}) // it listens
	err := sl.Send(t.Context(), Notice{Event: hub.Event{Kind: hub.Asked, Token: tokA, Request: hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "?"}}})
	if err == nil || !strings.Contains(err.Error(), "invalid_auth for ***") {
		t.Fatalf("Send: %v", err)
	}
	deadline := time.After(10 * time.Second)
	for !strings.Contains(logs.String(), "invalid_auth for ***") {
		select {
		case <-logs.wake:
		case <-deadline:
			t.Fatalf("no log of the refused connection: %s", logs.String())
		}
	}
	for _, tok := range []string{botToken, appToken} {
		if strings.Contains(err.Error()+logs.String(), tok) {
			t.Errorf("a token shows: %v\n%s", err, logs.String())
		}
	}
}
