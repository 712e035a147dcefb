package channel

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// botAPI is a double of the Telegram Bot API (https://core.telegram.org/bots/api),
// written from its documentation: POST /bot<token>/<method> with the
// parameters as a form, answered {"ok": true, "result": ...}; getUpdates
// long-polls the updates the test pushes.
type botAPI struct {
	*httptest.Server
	token   string
	mu      sync.Mutex
	calls   []botCall
	updates []map[string]any
	nextMsg int
	files   map[string][]byte // getFile's file_path → the file
	more    chan struct{}
	wake    chan struct{}
}

type botCall struct {
	method string
	form   map[string]string
}

func newBotAPI(t *testing.T, token string) *botAPI {
	api := &botAPI{token: token, nextMsg: 100, more: make(chan struct{}), wake: make(chan struct{}, 100)}
	api.Server = httptest.NewServer(http.HandlerFunc(api.serve))
	t.Cleanup(api.Close)
	return api
}

func (api *botAPI) serve(w http.ResponseWriter, r *http.Request) {
	if path, ok := strings.CutPrefix(r.URL.Path, "/file/bot"+api.token+"/"); ok { // a file's download link
		api.mu.Lock()
		b, ok := api.files[path]
		api.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	tok, method, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/bot"), "/")
	if !ok || tok != api.token {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"ok":false,"error_code":401,"description":"Unauthorized"}`))
		return
	}
	if err := r.ParseMultipartForm(1 << 20); err != nil && !errors.Is(err, http.ErrNotMultipart) {
		_ = r.ParseForm()
	}
	form := map[string]string{}
	for k, v := range r.Form {
		form[k] = v[0]
	}
	if r.MultipartForm != nil { // an upload: its files' names and sizes
		for k, fs := range r.MultipartForm.File {
			form[k] = fs[0].Filename + ":" + strconv.FormatInt(fs[0].Size, 10)
		}
	}
	var result any = true
	switch method {
	case "getUpdates":
		offset, _ := strconv.Atoi(form["offset"])
		for {
			api.mu.Lock()
			var out []map[string]any
			for _, u := range api.updates {
				if int(u["update_id"].(int)) >= offset {
					out = append(out, u)
				}
			}
			more := api.more
			api.mu.Unlock()
			if len(out) > 0 {
				result = out
				break
			}
			select {
			case <-more:
				continue
			case <-r.Context().Done():
				return
			case <-time.After(2 * time.Second):
				result = []any{}
			}
			break
		}
	case "getFile":
		path := "photos/" + form["file_id"] + ".jpg"
		api.mu.Lock()
		_, ok := api.files[path]
		api.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"ok":false,"error_code":400,"description":"Bad Request: invalid file_id"}`))
			return
		}
		result = map[string]any{"file_id": form["file_id"], "file_unique_id": "u" + form["file_id"], "file_path": path}
	case "sendMessage", "editMessageText", "sendPhoto":
		id, err := strconv.Atoi(form["message_id"])
		if err != nil { // a new message
			api.mu.Lock()
			api.nextMsg++
			id = api.nextMsg
			api.mu.Unlock()
			form["sent_message_id"] = strconv.Itoa(id)
		}
		chat, _ := strconv.ParseInt(form["chat_id"], 10, 64)
		result = map[string]any{"message_id": id, "date": 1700000000, "chat": map[string]any{"id": chat, "type": "private"}, "text": form["text"]}
	}
	if method != "getUpdates" {
		api.mu.Lock()
		api.calls = append(api.calls, botCall{method, form})
		api.mu.Unlock()
		api.wake <- struct{}{}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

// push makes an update available to getUpdates.
func (api *botAPI) push(u map[string]any) {
	api.mu.Lock()
	u["update_id"] = len(api.updates) + 1
	api.updates = append(api.updates, u)
	close(api.more)
	api.more = make(chan struct{})
	api.mu.Unlock()
}

// waitCall waits for the n-th call of method and returns its form.
func (api *botAPI) waitCall(t *testing.T, method string, n int) map[string]string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		api.mu.Lock()
		seen := 0
		for _, c := range api.calls {
			if c.method == method {
				if seen++; seen == n {
					api.mu.Unlock()
					return c.form
				}
			}
		}
		api.mu.Unlock()
		select {
		case <-api.wake:
		case <-deadline:
			t.Fatalf("no %s #%d", method, n)
		}
	}
}

func callback(chat int64, msg int, data string) map[string]any {
	return map[string]any{"callback_query": map[string]any{"id": "cb" + strconv.FormatInt(chat, 10) + data, "from": map[string]any{"id": chat, "is_bot": false, "first_name": "Ana"},
		"message": map[string]any{"message_id": msg, "date": 1700000000, "chat": map[string]any{"id": chat, "type": "private"}}, "chat_instance": "1", "data": data}}
}

// TestTelegram: a question goes to the configured chat as a message with
// an inline keyboard; a tap from another chat answers nothing; a tap in
// the chat answers with that button (the callback is answered saying
// so), and the message is edited to say the question is settled, its
// keyboard removed; a tap after that answers nothing; a reply to a
// question's message answers it with the reply's text.
func TestTelegram(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := newBotAPI(t, botToken)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	answered := f.ask(tokA, "q-1")
	sent := api.waitCall(t, "sendMessage", 1)
	if sent["chat_id"] != "42" || sent["parse_mode"] != "HTML" || !strings.HasPrefix(sent["text"], "<b>shop · Claude Code asks</b>\n\nDeploy <b>now</b>?") {
		t.Fatalf("sent %v", sent)
	}
	var kb struct {
		InlineKeyboard [][]struct {
			Text         string `json:"text"`
			CallbackData string `json:"callback_data"`
		} `json:"inline_keyboard"`
	}
	if err := json.Unmarshal([]byte(sent["reply_markup"]), &kb); err != nil || len(kb.InlineKeyboard) != 1 || len(kb.InlineKeyboard[0]) != 3 {
		t.Fatalf("keyboard %s: %v", sent["reply_markup"], err)
	}
	no := kb.InlineKeyboard[0][1]
	if no.Text != "No" || no.CallbackData != "a:1" {
		t.Fatalf("button %+v: its data must carry no capability (anyone in the chat can read it)", no)
	}

	// A tap can come only once the message is sent and its id noted.
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, 101}) })
	api.push(callback(99, 101, no.CallbackData)) // a stranger's chat
	if got := api.waitCall(t, "answerCallbackQuery", 1); got["text"] != "This chat may not answer." {
		t.Errorf("a stranger's tap: %v", got)
	}
	api.push(callback(42, 101, no.CallbackData))
	if got := api.waitCall(t, "answerCallbackQuery", 2); got["text"] != "Answered: No" {
		t.Errorf("the tap: %v", got)
	}
	if rep := answer(t, answered); rep == nil || rep.Contents[0].GetText().GetText() != "No" || rep.Door != "telegram" {
		t.Fatalf("the agent got %+v", rep)
	}
	edit := api.waitCall(t, "editMessageText", 1)
	if edit["message_id"] != "101" || !strings.HasSuffix(edit["text"], "— shop · Answered on telegram") || !strings.Contains(edit["reply_markup"], `"inline_keyboard":[]`) {
		t.Errorf("edit %v", edit)
	}
	api.push(callback(42, 101, kb.InlineKeyboard[0][0].CallbackData))
	if got := api.waitCall(t, "answerCallbackQuery", 3); !strings.Contains(got["text"], "can no longer answer") {
		t.Errorf("a tap after the answer: %v", got)
	}

	second := f.ask(tokA, "q-2")
	msg, _ := strconv.Atoi(api.waitCall(t, "sendMessage", 2)["sent_message_id"])
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, msg}) })
	api.push(map[string]any{"message": map[string]any{"message_id": 500, "date": 1700000000, "text": "Wait for the review.",
		"chat": map[string]any{"id": 42, "type": "private"}, "from": map[string]any{"id": 42, "is_bot": false, "first_name": "Ana"},
		"reply_to_message": map[string]any{"message_id": msg, "date": 1700000000, "chat": map[string]any{"id": 42, "type": "private"}}}})
	if rep := answer(t, second); rep == nil || rep.Contents[0].GetText().GetText() != "Wait for the review." || rep.Nickname != "Ana · Telegram" {
		t.Fatalf("the reply: %+v", rep)
	}
}

// tracks: tg has noted what the message k asks.
func (tg *Telegram) tracks(k sentKey) bool {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	_, ok := tg.asks[k]
	return ok
}
