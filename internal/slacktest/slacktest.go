// Package slacktest is a double of Slack's Web API and Socket Mode,
// written from their documentation
// (https://docs.slack.dev/apis/events-api/using-socket-mode,
// https://docs.slack.dev/reference/methods/apps.connections.open,
// chat.postMessage, chat.update, chat.postEphemeral), for the channel's
// unit tests, the end-to-end tests and the benchmark: a method is POST
// /api/<method>, its token in the form's "token" or an "Authorization:
// Bearer" header, answered {"ok": true, ...} or {"ok": false, "error":
// ...}; apps.connections.open, with the app-level token, answers the
// WebSocket URL to dial, where the app is greeted {"type": "hello"} and
// then sent envelopes ({"envelope_id", "type": "events_api" |
// "interactive", "payload"}), each to be acknowledged by sending back
// {"envelope_id": ...}.
package slacktest

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/internal/apicalls"
)

// Call is one call of a Web API method; its Form is the parameters
// (without the token) and "_ts", the timestamp the call answered (a
// posted message's), or "_error", why it was refused (invalid_blocks,
// message_not_found).
type Call = apicalls.Call

// API is the double. Safe for concurrent use.
type API struct {
	*httptest.Server
	botToken, appToken string
	// Refuse, set before the first call, answers every method with an
	// error that names the token presented, as a misconfigured proxy
	// might.
	Refuse bool

	mu    sync.Mutex
	calls []Call
	acks  []string
	conn  *websocket.Conn // the app's connection, once it dialled: the latest
	dials int             // the connections the app made
	ts    int
	envs  int
	// changed is when anything above changes.
	changed apicalls.Changes
	// holds are the methods whose calls wait (Hold, HoldAnswer).
	holds apicalls.Holds
	// deleted are the timestamps of the messages the person deleted
	// (Delete).
	deleted map[string]bool
	// refused counts the calls refused for their token, by method.
	refused map[string]int
	// down is the HTTP status every method answers while Slack is out
	// of service (Down), 0 while it is not.
	down int
	// files are the files people shared (AddFile), by their path.
	files map[string][]byte
	// fetched counts the downloads of files with the bot token.
	fetched int
}

// Down has every method answered with the HTTP status status and no
// body, as Slack's edge answers while Slack is out of service (503) or
// a proxy does not route the API (404), or rate limits them (429, with
// Retry-After: RetryAfter); 0 serves them again. Such calls are
// recorded, their "_error" the status.
func (api *API) Down(status int) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.down = status
}

// RetryAfter is the seconds a rate-limited call is told to wait (Down).
const RetryAfter = 30

// Disconnect sends the app's connection Slack's disconnect message with
// reason ("refresh_requested", "warning", "link_disabled"), then closes
// it, as Slack does when it refreshes a connection it has held a while.
func (api *API) Disconnect(reason string) error {
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.conn == nil {
		return fmt.Errorf("disconnect: the app has not connected")
	}
	err := api.conn.WriteJSON(map[string]any{"type": "disconnect", "reason": reason, "debug_info": map[string]any{"host": "applink-double"}})
	_ = api.conn.Close()
	if err != nil {
		return fmt.Errorf("disconnect: %w", err)
	}
	return nil
}

// Refused is how many calls of method were refused (invalid_auth) for
// the token they came with.
func (api *API) Refused(method string) int {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.refused[method]
}

// SetTokens has the double take these tokens from now on: the app
// installed again, say, or its app-level token made again.
func (api *API) SetTokens(botToken, appToken string) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.botToken, api.appToken = botToken, appToken
}

// Delete deletes the bot's message ts, as the person can: an update of
// it is refused from then on (message_not_found).
func (api *API) Delete(ts string) {
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.deleted == nil {
		api.deleted = map[string]bool{}
	}
	api.deleted[ts] = true
}

// Hold makes the calls of method wait, before they are done, until
// release is called (once); arrived is closed when the first comes: as
// a call on its way when its caller dies.
func (api *API) Hold(method string) (arrived <-chan struct{}, release func()) {
	return api.holdOf(method, false)
}

// HoldAnswer makes the calls of method wait once done (a message
// posted, the call recorded) and before they are answered, until
// release: as Slack that posted the message and whose answer never
// reached the app (it died meanwhile).
func (api *API) HoldAnswer(method string) (arrived <-chan struct{}, release func()) {
	return api.holdOf(method, true)
}

// HoldFiles makes the downloads of shared files (AddFile's) wait until
// release: as Slack's file host, slow to answer.
func (api *API) HoldFiles() (arrived <-chan struct{}, release func()) {
	return api.holdOf(filesHold, false)
}

// filesHold names the downloads' hold among the methods'.
const filesHold = "files-pri"

func (api *API) holdOf(method string, after bool) (<-chan struct{}, func()) {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.holds.Set(method, after, nil)
}

// New starts a double that takes the bot token and the app-level token.
// Close stops it, and the app's connection.
func New(botToken, appToken string) *API {
	api := &API{botToken: botToken, appToken: appToken, ts: 100, refused: map[string]int{}}
	api.Server = httptest.NewServer(api.mux())
	return api
}

// NewOn is New serving on ln: an in-memory network's, for a test in a
// synctest bubble (its URL then names no real address).
func NewOn(botToken, appToken string, ln net.Listener) *API {
	api := &API{botToken: botToken, appToken: appToken, ts: 100, refused: map[string]int{}}
	api.Server = &httptest.Server{Listener: ln, Config: &http.Server{Handler: api.mux(), ReadHeaderTimeout: time.Minute}}
	api.Start()
	return api
}

func (api *API) mux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/{method}", api.method) // as Slack: a GET with its query too
	mux.HandleFunc("GET /link/", api.socket)
	mux.HandleFunc("GET /files-pri/{file}/{name}", api.file)
	return mux
}

// AddFile keeps data as a file a person shared, id its ID (F…), and
// returns it as a message's files[] holds it (api.slack.com/types/file):
// its url_private, served on the double's host, needs the bot token.
func (api *API) AddFile(id, name, mimetype string, data []byte) map[string]any {
	path := "/files-pri/T1-" + id + "/" + name
	api.mu.Lock()
	if api.files == nil {
		api.files = map[string][]byte{}
	}
	api.files[path] = data
	api.mu.Unlock()
	return map[string]any{"id": id, "name": name, "title": name, "mimetype": mimetype, "filetype": strings.TrimPrefix(mimetype, "image/"),
		"size": len(data), "mode": "hosted", "url_private": api.URL + path, "url_private_download": api.URL + path + "?download=1"}
}

// Fetched is how many files were downloaded with the bot token.
func (api *API) Fetched() int {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.fetched
}

// file serves a shared file to a request bearing the bot token
// (Authorization: Bearer); as Slack, it sends any other to sign in.
func (api *API) file(w http.ResponseWriter, r *http.Request) {
	api.mu.Lock()
	h := api.holds.Of(filesHold, nil)
	api.mu.Unlock()
	if !h.Before(r) {
		return
	}
	api.mu.Lock()
	data, ok := api.files[r.URL.Path]
	authorized := r.Header.Get("Authorization") == "Bearer "+api.botToken
	if ok && authorized {
		api.fetched++
	}
	api.mu.Unlock()
	switch {
	case !authorized:
		http.Redirect(w, r, "/?redir="+url.QueryEscape(r.URL.Path), http.StatusFound)
	case !ok:
		http.NotFound(w, r)
	default:
		_, _ = w.Write(data)
	}
}

// FileReply is ThreadReply with files (AddFile's): a file_share message.
func FileReply(user, channel, ts, text string, files ...map[string]any) map[string]any {
	env := ThreadReply(user, channel, ts, text)
	ev := env["event"].(map[string]any)
	ev["subtype"], ev["files"], ev["upload"] = "file_share", files, false
	return env
}

// BotUser is the bot's user ID (auth.test's user_id): a thread reply's
// parent_user_id when the thread is of a message the bot posted.
const BotUser = "UBOT"

// Start is New, closed when t ends.
func Start(t testing.TB, botToken, appToken string) *API {
	api := New(botToken, appToken)
	t.Cleanup(api.Close)
	return api
}

// Close closes the app's connection and stops the double.
func (api *API) Close() {
	api.mu.Lock()
	if api.conn != nil {
		_ = api.conn.Close()
	}
	api.mu.Unlock()
	api.Server.Close()
}

// URL of the Web API, as the Slack channel's APIURL takes it.
func (api *API) APIURL() string { return api.URL + "/api" }

// DM is the conversation a message posted to a user's ID goes to: their
// DM with the app.
func DM(channel string) string {
	if strings.HasPrefix(channel, "U") {
		return "D" + channel[1:]
	}
	return channel
}

func (api *API) method(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = r.ParseForm()
	form := map[string]string{}
	for k, v := range r.Form {
		form[k] = v[0]
	}
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if tok == "" {
		tok = form["token"]
	}
	method := r.PathValue("method")
	api.mu.Lock()
	if down := api.down; down != 0 {
		api.calls = append(api.calls, Call{Method: method, Form: map[string]string{"_error": strconv.Itoa(down)}, At: time.Now()})
		api.changed.Changed()
		api.mu.Unlock()
		if down == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", strconv.Itoa(RetryAfter))
		}
		w.WriteHeader(down)
		return
	}
	want := api.botToken
	if method == "apps.connections.open" {
		want = api.appToken
	}
	if api.Refuse || tok != want {
		api.refused[method]++
		api.changed.Changed()
	}
	api.mu.Unlock()
	reply := func(v map[string]any) { _ = json.NewEncoder(w).Encode(v) }
	if api.Refuse {
		reply(map[string]any{"ok": false, "error": "invalid_auth for " + tok})
		return
	}
	if tok != want {
		reply(map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	api.mu.Lock()
	h := api.holds.Of(method, form)
	api.mu.Unlock()
	if !h.Before(r) {
		return
	}
	api.mu.Lock()
	api.ts++
	ts := "1700000000." + strconv.Itoa(api.ts)
	delete(form, "token")
	form["_ts"] = ts
	errCode := "invalid_blocks"
	if method == "chat.postMessage" || method == "chat.update" {
		if why := invalidBlocks(form["blocks"]); why != "" {
			form["_error"] = why // refused: invalid_blocks
		}
	}
	if method == "chat.update" && api.deleted[form["ts"]] {
		errCode = "message_not_found"
		form["_error"] = errCode
	}
	api.calls = append(api.calls, Call{Method: method, Form: form, At: time.Now()})
	api.changed.Changed()
	history := api.historyLocked(DM(form["channel"]), form["latest"])
	api.mu.Unlock()
	if !h.After(r) {
		return
	}
	channel := DM(form["channel"])
	if why := form["_error"]; why != "" {
		reply(map[string]any{"ok": false, "error": errCode, "errors": []string{why}})
		return
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
	case "conversations.history":
		reply(map[string]any{"ok": true, "messages": history, "has_more": false})
	case "auth.test":
		reply(map[string]any{"ok": true, "url": "https://example.slack.com/", "team": "Example", "user": "aa", "team_id": "T1",
			"user_id": BotUser, "bot_id": "B1"})
	default:
		reply(map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// historyLocked is what conversations.history answers for the message
// latest of channel, asked inclusive with a limit of 1 (the only way
// the app asks): the message the bot posted there, its blocks as last
// posted or updated. Called with api.mu held.
func (api *API) historyLocked(channel, latest string) []any {
	if latest == "" {
		return []any{}
	}
	var msg map[string]any
	for _, c := range api.calls {
		switch {
		case c.Method == "chat.postMessage" && c.Form["_ts"] == latest && DM(c.Form["channel"]) == channel && c.Form["_error"] == "":
			msg = map[string]any{"type": "message", "user": BotUser, "bot_id": "B1", "ts": latest, "text": c.Form["text"]}
		case c.Method == "chat.update" && c.Form["ts"] == latest && msg != nil && c.Form["_error"] == "":
			msg["text"] = c.Form["text"]
		default:
			continue
		}
		var blocks []any
		if json.Unmarshal([]byte(c.Form["blocks"]), &blocks) == nil {
			msg["blocks"] = blocks
		}
	}
	if msg == nil {
		return []any{}
	}
	return []any{msg}
}

// pingEvery is how often the double pings the app's connection.
const pingEvery = 10 * time.Second

// upgrader takes the app's dial (its Origin is https://api.slack.com).
var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (api *API) socket(w http.ResponseWriter, r *http.Request) {
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
	api.dials++
	err = c.WriteJSON(map[string]any{"type": "hello", "num_connections": 1,
		"debug_info": map[string]any{"host": "applink-double", "approximate_connection_time": 18060}, "connection_info": map[string]any{"app_id": "A1"}})
	api.changed.Changed()
	api.mu.Unlock()
	// Slack pings the app's connection every few seconds; the app drops
	// one that is not pinged for a while.
	var wg sync.WaitGroup
	defer wg.Wait()
	done := make(chan struct{})
	defer close(done)
	wg.Go(func() {
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if c.WriteControl(websocket.PingMessage, nil, time.Now().Add(pingEvery)) != nil {
					return
				}
			}
		}
	})
	// The one reader of the connection: the acknowledgements.
	for err == nil {
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if err = c.ReadJSON(&ack); err == nil {
			api.mu.Lock()
			api.acks = append(api.acks, ack.EnvelopeID)
			api.changed.Changed()
			api.mu.Unlock()
		}
	}
}

// await waits until ok, called with api.mu held, holds, or ctx ends.
func (api *API) await(ctx context.Context, ok func() bool) error {
	return api.changed.Await(ctx, &api.mu, ok)
}

// WaitFor waits until done, given the calls so far, holds, or ctx ends.
func (api *API) WaitFor(ctx context.Context, done func([]Call) bool) error {
	return api.await(ctx, func() bool { return done(api.calls) })
}

// Wait is the n-th call of method, once it came (within ctx).
func (api *API) Wait(ctx context.Context, method string, n int) (Call, error) {
	return apicalls.Wait(ctx, api.WaitFor, method, n)
}

// Connected waits until the app has dialled the Socket Mode connection.
func (api *API) Connected(ctx context.Context) error {
	if err := api.await(ctx, func() bool { return api.conn != nil }); err != nil {
		return fmt.Errorf("wait for the app's connection: %w", err)
	}
	return nil
}

// Dialled waits until the app has made its n-th Socket Mode connection
// (another process of the app taking over, say): envelopes go to that
// one from then on.
func (api *API) Dialled(ctx context.Context, n int) error {
	if err := api.await(ctx, func() bool { return api.dials >= n }); err != nil {
		return fmt.Errorf("wait for the app's connection %d: %w", n, err)
	}
	return nil
}

// Sent waits until n envelopes were written to the app's connections:
// the app has, or had, the n-th in hand.
func (api *API) Sent(ctx context.Context, n int) error {
	if err := api.await(ctx, func() bool { return api.envs >= n }); err != nil {
		return fmt.Errorf("wait for envelope %d to be sent: %w", n, err)
	}
	return nil
}

// Send sends an envelope of typ ("interactive", "events_api") with
// payload over the app's connection and waits for its acknowledgement.
func (api *API) Send(ctx context.Context, typ string, payload map[string]any) error {
	return api.send(ctx, typ, payload, 0)
}

// Retry is Send of an envelope Slack delivers again (retry_attempt 1,
// a new envelope ID): what Socket Mode does when an acknowledgement came
// late or not at all.
func (api *API) Retry(ctx context.Context, typ string, payload map[string]any) error {
	return api.send(ctx, typ, payload, 1)
}

func (api *API) send(ctx context.Context, typ string, payload map[string]any, attempt int) error {
	if err := api.Connected(ctx); err != nil {
		return err
	}
	reason := ""
	if attempt > 0 {
		reason = "timeout"
	}
	api.mu.Lock()
	api.parentLocked(typ, payload)
	api.envs++
	id := "env-" + strconv.Itoa(api.envs)
	err := api.conn.WriteJSON(map[string]any{"envelope_id": id, "type": typ, "payload": payload,
		"accepts_response_payload": typ == "interactive", "retry_attempt": attempt, "retry_reason": reason})
	api.changed.Changed()
	api.mu.Unlock()
	if err != nil {
		return fmt.Errorf("send envelope %s: %w", id, err)
	}
	if err := api.await(ctx, func() bool { return slices.Contains(api.acks, id) }); err != nil {
		return fmt.Errorf("wait for the acknowledgement of %s: %w", id, err)
	}
	return nil
}

// parentLocked gives a thread reply without a parent_user_id the one
// Slack gives it: the bot, when the bot posted the thread's message,
// else the person replying. Called with api.mu held.
func (api *API) parentLocked(typ string, payload map[string]any) {
	ev, ok := payload["event"].(map[string]any)
	if typ != "events_api" || !ok || ev["thread_ts"] == nil || ev["parent_user_id"] != nil {
		return
	}
	ev["parent_user_id"] = ev["user"]
	if slices.ContainsFunc(api.calls, func(c Call) bool { return c.Method == "chat.postMessage" && c.Form["_ts"] == ev["thread_ts"] }) {
		ev["parent_user_id"] = BotUser
	}
}

// Call is the form of the n-th call of method; t fails when none came
// within 10 s.
func (api *API) Call(t testing.TB, method string, n int) map[string]string {
	t.Helper()
	return apicalls.Form(t, api.WaitFor, method, n)
}

// Envelope is Send; t fails when it is not acknowledged within 10 s.
func (api *API) Envelope(t testing.TB, typ string, payload map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := api.Send(ctx, typ, payload); err != nil {
		t.Fatal(err)
	}
}

// Redelivered is Retry; t fails when it is not acknowledged within 10 s.
func (api *API) Redelivered(t testing.TB, typ string, payload map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := api.Retry(ctx, typ, payload); err != nil {
		t.Fatal(err)
	}
}

// Press is a block_actions interaction: user pressed the button with
// value of the message ts in channel. Its action_ts and trigger_id are
// those of that press (Slack's are unique to a press): two presses
// differ in one of the four.
func Press(user, channel, ts, value string) map[string]any {
	n := hash(user, channel, ts, value)
	at := fmt.Sprintf("1700000001.%06d", n%1_000_000)
	return map[string]any{"type": "block_actions", "user": map[string]any{"id": user, "username": "ana", "name": "ana", "team_id": "T1"},
		"api_app_id": "A1", "token": "verification", "trigger_id": fmt.Sprintf("1.2.%d", n), "action_ts": at,
		"container": map[string]any{"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false},
		"team":      map[string]any{"id": "T1", "domain": "example"}, "channel": map[string]any{"id": channel, "name": "directmessage"},
		"message": map[string]any{"type": "message", "ts": ts, "text": "…"},
		"actions": []any{map[string]any{"type": "button", "action_id": "answer", "block_id": "answers", "value": value,
			"text": map[string]any{"type": "plain_text", "text": "…"}, "action_ts": at}}}
}

// Ticked is the state of a message's checkboxes element, as a
// block_actions payload carries it ("state": {"values": {block_id:
// {action_id: ...}}}): the values of the options ticked, each with the
// text it shows.
func Ticked(blockID, actionID string, values ...string) map[string]any {
	return map[string]any{"values": map[string]any{blockID: map[string]any{actionID: map[string]any{
		"type": "checkboxes", "selected_options": options(values)}}}}
}

func options(values []string) []any {
	out := []any{}
	for _, v := range values {
		out = append(out, map[string]any{"text": map[string]any{"type": "plain_text", "text": "…"}, "value": v})
	}
	return out
}

// PressIn is Press on a message whose inputs are in state (Ticked):
// Slack sends the state of a message's stateful elements with every
// block_actions payload.
// Two presses with another state are two presses: their action_ts
// differ.
func PressIn(user, channel, ts, value string, state map[string]any) map[string]any {
	b, _ := json.Marshal(state)
	p := Press(user, channel, ts, value)
	n := hash(user, channel, ts, value, string(b))
	at := fmt.Sprintf("1700000001.%06d", n%1_000_000)
	p["action_ts"], p["trigger_id"] = at, fmt.Sprintf("1.2.%d", n)
	p["actions"].([]any)[0].(map[string]any)["action_ts"] = at
	p["state"] = state
	return p
}

// Tick is the block_actions payload Slack sends when user ticks or
// unticks a box of the checkboxes element actionID of block blockID in
// the message ts: the options ticked now, in the action and the state.
func Tick(user, channel, ts, blockID, actionID string, values ...string) map[string]any {
	p := Press(user, channel, ts, "tick\x00"+strings.Join(values, "\x00"))
	act := p["actions"].([]any)[0].(map[string]any)
	delete(act, "value")
	delete(act, "text")
	act["type"], act["action_id"], act["block_id"] = "checkboxes", actionID, blockID
	act["selected_options"] = options(values)
	p["state"] = Ticked(blockID, actionID, values...)
	return p
}

// ThreadReply is an events_api message event: user replied text in the
// thread of the message ts in channel. Its event ID and its own ts are
// those of that reply (as Slack's are unique to an event).
func ThreadReply(user, channel, ts, text string) map[string]any {
	n := hash(user, channel, ts, text)
	own := fmt.Sprintf("1700000002.%06d", n%1_000_000)
	return map[string]any{"token": "verification", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
		"event_id": fmt.Sprintf("Ev%08X", n), "event_time": 1700000002,
		"event": map[string]any{"type": "message", "channel": channel, "user": user, "text": text, "ts": own,
			"thread_ts": ts, "channel_type": "im", "event_ts": own}}
}

// Block is one Block Kit block of a posted message, as far as the tests
// read it.
type Block struct {
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
		// Options are a checkboxes element's.
		Options []struct {
			Value string `json:"value"`
			Text  struct {
				Text string `json:"text"`
			} `json:"text"`
		} `json:"options"`
	} `json:"elements"`
}

// Boxes is the texts of the options of the checkboxes of blocks, in
// order.
func Boxes(blocks []Block) []string {
	var out []string
	for _, b := range blocks {
		for _, e := range b.Elements {
			if e.Type == "checkboxes" {
				for _, o := range e.Options {
					out = append(out, o.Text.Text)
				}
			}
		}
	}
	return out
}

// BlocksOf reads a call's blocks.
func BlocksOf(form map[string]string) ([]Block, error) {
	var b []Block
	if err := json.Unmarshal([]byte(form["blocks"]), &b); err != nil {
		return nil, fmt.Errorf("read blocks %q: %w", form["blocks"], err)
	}
	return b, nil
}

// Buttons is the labels of the buttons of blocks, in order.
func Buttons(blocks []Block) []string {
	var out []string
	for _, b := range blocks {
		for _, e := range b.Elements {
			if e.Type == "button" {
				out = append(out, e.Text.Text)
			}
		}
	}
	return out
}

// hash makes the IDs of an event from what it is.
func hash(parts ...string) uint32 {
	h := fnv.New32a()
	for _, p := range parts {
		_, _ = h.Write([]byte(p + "\x00"))
	}
	return h.Sum32()
}

// Block Kit's bounds (https://docs.slack.dev/reference/block-kit/blocks/section-block,
// .../block-elements/button-element): a section's text holds 3,000
// characters, a button's 75; Slack refuses a message past them.
const (
	maxSectionText = 3000
	maxButtonText  = 75 // and an option's text
	maxOptions     = 10 // a checkboxes element's
)

// invalidBlocks is why Slack would refuse blocks, "" when it would not.
func invalidBlocks(blocks string) string {
	if blocks == "" {
		return ""
	}
	bs, err := BlocksOf(map[string]string{"blocks": blocks})
	if err != nil {
		return "blocks are not JSON"
	}
	for i, b := range bs {
		if b.Text != nil && utf8.RuneCountInString(b.Text.Text) > maxSectionText {
			return fmt.Sprintf("must be less than %d characters [json-pointer:/blocks/%d/text/text]", maxSectionText+1, i)
		}
		for j, e := range b.Elements {
			if utf8.RuneCountInString(e.Text.Text) > maxButtonText {
				return fmt.Sprintf("must be less than %d characters [json-pointer:/blocks/%d/elements/%d/text/text]", maxButtonText+1, i, j)
			}
			if e.Type == "checkboxes" && len(e.Options) > maxOptions {
				return fmt.Sprintf("must provide at most %d items [json-pointer:/blocks/%d/elements/%d/options]", maxOptions, i, j)
			}
			for k, o := range e.Options {
				if utf8.RuneCountInString(o.Text.Text) > maxButtonText {
					return fmt.Sprintf("must be less than %d characters [json-pointer:/blocks/%d/elements/%d/options/%d/text/text]", maxButtonText+1, i, j, k)
				}
			}
		}
	}
	return ""
}
