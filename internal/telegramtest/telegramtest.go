// Package telegramtest is a double of the Telegram Bot API
// (https://core.telegram.org/bots/api), written from its documentation,
// for the channel's unit tests, the end-to-end tests and the benchmark:
// POST /bot<token>/<method> with the parameters as a form, answered
// {"ok": true, "result": ...}; getUpdates long-polls the updates pushed
// with Push until a later getUpdates confirms them. Every other call is
// recorded, with when it arrived.
package telegramtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/apicalls"
)

// Call is one call of a method other than getUpdates; a sendMessage's
// Form also holds "sent_message_id", the ID of the message it made, or
// "_error", why it was refused as Telegram would refuse it (limits.go:
// a text too long, HTML it cannot parse).
type Call = apicalls.Call

// API is the double. Safe for concurrent use.
type API struct {
	*httptest.Server
	token string

	mu    sync.Mutex
	calls []Call
	// updates are those not yet confirmed; lastUpdate is the ID of the
	// last pushed, confirmed the highest confirmed (getUpdates with an
	// offset past it: Telegram then forgets it).
	updates               []map[string]any
	lastUpdate, confirmed int
	// handed is the ID of the last update a getUpdates answer held.
	handed  int
	nextMsg int
	made    map[int]bool // the messages the bot sent
	deleted map[int]bool // those the person deleted since (Delete)
	// shown are the text and the reply_markup (JSON) of each message
	// the bot sent, as last sent or edited: Telegram hands them with a
	// reply to it (reply_to_message) and with a tap on it.
	shown map[int][2]string
	files map[string][]byte // getFile's file_path → the file
	// changed is when a call or an update comes.
	changed apicalls.Changes
	// holds are the methods whose calls wait (Hold).
	holds apicalls.Holds
	// polling is closed when another getUpdates comes while one waits:
	// Telegram ends the earlier with 409 Conflict ("terminated by other
	// getUpdates request; make sure that only one bot instance is
	// running"). polls and conflicts count them.
	polling          chan struct{}
	polls, conflicts int
	// refused counts the calls refused for a token not the bot's.
	refused int
	// refuse, when set, is why the double refuses a message's text
	// besides limits.go (Refuse).
	refuse func(method string, form map[string]string) string
}

// Refuse has the double refuse, besides what limits.go refuses, the
// messages (sendMessage, editMessageText, sendPhoto) that why names a
// reason for, with 400 Bad Request and that reason: what Telegram may
// refuse that the double does not model (a tag, an entity or a link
// its parser takes no more).
func (api *API) Refuse(why func(method string, form map[string]string) string) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.refuse = why
}

// Refused is how many calls came with a token not the bot's, each
// answered 401 Unauthorized as Telegram does.
func (api *API) Refused() int {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.refused
}

// SetToken has the double take token from now on (and refuse the one it
// took): a bot's token made again with @BotFather's /revoke.
func (api *API) SetToken(token string) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.token = token
}

// Polls is how many getUpdates calls came.
func (api *API) Polls() int {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.polls
}

// Confirmed is the ID of the last update confirmed: a getUpdates came
// with an offset past it, and no poller is handed it again.
func (api *API) Confirmed() int {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.confirmed
}

// ConfirmedBy waits until update id is confirmed.
func (api *API) ConfirmedBy(ctx context.Context, id int) error {
	return api.await(ctx, func() bool { return api.confirmed >= id })
}

// Handed waits until a getUpdates was answered with the update id (or
// one after it): the bot's poller has it, or had it, in hand.
func (api *API) Handed(ctx context.Context, id int) error {
	if err := api.await(ctx, func() bool { return api.handed >= id }); err != nil {
		return fmt.Errorf("wait for update %d to be handed: %w", id, err)
	}
	return nil
}

// await waits until ok, called with api.mu held, holds, or ctx ends.
func (api *API) await(ctx context.Context, ok func() bool) error {
	return api.changed.Await(ctx, &api.mu, ok)
}

// Conflicts is how many getUpdates calls were ended by another, as two
// pollers of one bot are.
func (api *API) Conflicts() int {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.conflicts
}

// AddFile makes a file the bot may download: getFile with fileID answers
// its file_path, and the file link serves data.
func (api *API) AddFile(fileID string, data []byte) {
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.files == nil {
		api.files = map[string][]byte{}
	}
	api.files[filePath(fileID)] = data
}

func filePath(fileID string) string { return "photos/" + fileID + ".jpg" }

// FirstMessageID is the ID of the first message the double makes; the
// next ones count up from it.
const FirstMessageID = 101

// New starts a double that takes the bot token token. Close stops it.
func New(token string) *API {
	api := &API{token: token, nextMsg: FirstMessageID - 1}
	api.Server = httptest.NewServer(http.HandlerFunc(api.serve))
	return api
}

// NewOn is New serving on ln: an in-memory network's, for a test in a
// synctest bubble (its URL then names no real address).
func NewOn(token string, ln net.Listener) *API {
	api := &API{token: token, nextMsg: FirstMessageID - 1}
	api.Server = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(api.serve), ReadHeaderTimeout: time.Minute}}
	api.Start()
	return api
}

// Hold makes the calls of method wait, before they are answered, until
// release is called (once); arrived is closed when the first comes. As
// a send that Telegram takes its time to answer: the question goes out,
// and what follows waits for the answer.
func (api *API) Hold(method string) (arrived <-chan struct{}, release func()) {
	return api.HoldWhen(method, nil)
}

// HoldWhen is Hold for the calls of method whose form when accepts: a
// getUpdates that would confirm an update, say, as a reply handled and
// its confirmation not yet come when the bot's poller dies.
func (api *API) HoldWhen(method string, when func(form map[string]string) bool) (arrived <-chan struct{}, release func()) {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.holds.Set(method, false, when)
}

// HoldAnswer makes the calls of method wait after they are done (a
// message made, the call recorded) and before they are answered, until
// release: as Telegram that sent the message and whose answer never
// reached the bot (it died meanwhile, or the connection broke).
func (api *API) HoldAnswer(method string) (arrived <-chan struct{}, release func()) {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.holds.Set(method, true, nil)
}

// Start is New, closed when t ends.
func Start(t testing.TB, token string) *API {
	api := New(token)
	t.Cleanup(api.Close)
	return api
}

// Delete deletes the bot's message msg, as the person can: an edit of
// it is refused from then on ("message to edit not found").
func (api *API) Delete(msg int) {
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.deleted == nil {
		api.deleted = map[int]bool{}
	}
	api.deleted[msg] = true
}

// pollFor bounds one getUpdates with nothing to answer, as Telegram's
// own long poll does (with a longer bound).
const pollFor = 2 * time.Second

func (api *API) serve(w http.ResponseWriter, r *http.Request) {
	api.mu.Lock()
	token := api.token
	api.mu.Unlock()
	if path, ok := strings.CutPrefix(r.URL.Path, "/file/bot"+token+"/"); ok { // a file's download link
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
	api.mu.Lock()
	want := api.token
	if ok && tok != want {
		api.refused++
		api.changed.Changed()
	}
	api.mu.Unlock()
	if !ok || tok != want {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"ok":false,"error_code":401,"description":"Unauthorized"}`))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseMultipartForm(1 << 20); err != nil && !errors.Is(err, http.ErrNotMultipart) { // #nosec G120 -- the body is bounded just above
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
	api.mu.Lock()
	h := api.holds.Of(method, form)
	api.mu.Unlock()
	if !h.Before(r) {
		return
	}
	var result any = true
	switch method {
	case "getUpdates":
		offset, _ := strconv.Atoi(form["offset"])
		mine := make(chan struct{})
		api.mu.Lock()
		if api.polling != nil {
			close(api.polling)
			api.conflicts++
		}
		api.polling = mine
		api.polls++
		// "An update is considered confirmed as soon as getUpdates is
		// called with an offset higher than its update_id."
		if offset > api.confirmed+1 {
			api.confirmed = min(offset-1, api.lastUpdate)
			api.updates = slices.DeleteFunc(api.updates, func(u map[string]any) bool { return u["update_id"].(int) <= api.confirmed })
			api.changed.Changed()
		}
		api.mu.Unlock()
		defer func() {
			api.mu.Lock()
			if api.polling == mine {
				api.polling = nil
			}
			api.mu.Unlock()
		}()
		poll := time.NewTimer(pollFor)
		defer poll.Stop()
		for {
			api.mu.Lock()
			var out []map[string]any
			for _, u := range api.updates {
				if u["update_id"].(int) >= offset {
					out = append(out, u)
				}
			}
			changed := api.changed.Next()
			if len(out) > 0 {
				api.handed = max(api.handed, out[len(out)-1]["update_id"].(int))
				api.changed.Changed()
			}
			api.mu.Unlock()
			if len(out) > 0 {
				result = out
				break
			}
			select {
			case <-changed:
				continue
			case <-mine:
				w.WriteHeader(http.StatusConflict)
				_, _ = w.Write([]byte(`{"ok":false,"error_code":409,"description":"Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}`))
				return
			case <-r.Context().Done():
				return
			case <-poll.C:
				result = []any{}
			}
			break
		}
	case "getFile":
		path := filePath(form["file_id"])
		api.mu.Lock()
		_, ok := api.files[path]
		api.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"ok":false,"error_code":400,"description":"Bad Request: invalid file_id"}`))
			return
		}
		result = map[string]any{"file_id": form["file_id"], "file_unique_id": "u" + form["file_id"], "file_path": path}
	case "editMessageReplyMarkup":
		// "Use this method to edit only the reply markup of messages. On
		// success, if the edited message is not an inline message, the
		// edited Message is returned": refused, as Telegram refuses it,
		// for a message gone or a keyboard that changes nothing.
		id, _ := strconv.Atoi(form["message_id"])
		chat, _ := strconv.ParseInt(form["chat_id"], 10, 64)
		api.mu.Lock()
		why := markupRefused(form)
		switch {
		case why != "":
		case !api.made[id] || api.deleted[id]:
			why = "message to edit not found"
		case api.shown[id][1] == form["reply_markup"]:
			why = "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"
		default:
			api.shown[id] = [2]string{api.shown[id][0], form["reply_markup"]}
		}
		if why != "" {
			form["_error"] = why
			api.calls = append(api.calls, Call{Method: method, Form: form, At: time.Now()})
			api.changed.Changed()
			api.mu.Unlock()
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error_code": 400, "description": "Bad Request: " + why})
			return
		}
		text := api.shown[id][0]
		api.mu.Unlock()
		result = map[string]any{"message_id": id, "date": 1700000000, "chat": map[string]any{"id": chat, "type": "private"}, "text": text}
	case "answerCallbackQuery":
		// "Text of the notification. If not specified, nothing will be
		// shown to the user, 0-200 characters"
		// (https://core.telegram.org/bots/api#answercallbackquery).
		if utf16Len(form["text"]) > maxNotice {
			form["_error"] = "MESSAGE_TOO_LONG"
			api.mu.Lock()
			api.calls = append(api.calls, Call{Method: method, Form: form, At: time.Now()})
			api.changed.Changed()
			api.mu.Unlock()
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"ok":false,"error_code":400,"description":"Bad Request: MESSAGE_TOO_LONG"}`))
			return
		}
	case "sendMessage", "editMessageText", "sendPhoto":
		why := refused(method, form)
		api.mu.Lock()
		refuse := api.refuse
		api.mu.Unlock()
		if why == "" && refuse != nil {
			why = refuse(method, form)
		}
		if method == "editMessageText" && why == "" {
			api.mu.Lock()
			id, _ := strconv.Atoi(form["message_id"])
			if api.deleted[id] {
				why = "message to edit not found"
			}
			api.mu.Unlock()
		}
		if why != "" {
			form["_error"] = why
			api.mu.Lock()
			api.calls = append(api.calls, Call{Method: method, Form: form, At: time.Now()})
			api.changed.Changed()
			api.mu.Unlock()
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error_code": 400, "description": "Bad Request: " + why})
			return
		}
		chat, _ := strconv.ParseInt(form["chat_id"], 10, 64)
		api.mu.Lock()
		id, err := strconv.Atoi(form["message_id"])
		if err != nil { // a new message
			api.nextMsg++
			id = api.nextMsg
			form["sent_message_id"] = strconv.Itoa(id)
			if api.made == nil {
				api.made = map[int]bool{}
			}
			api.made[id] = true
		}
		if api.made[id] && method != "sendPhoto" {
			if api.shown == nil {
				api.shown = map[int][2]string{}
			}
			api.shown[id] = [2]string{form["text"], form["reply_markup"]}
		}
		api.mu.Unlock()
		result = map[string]any{"message_id": id, "date": 1700000000, "chat": map[string]any{"id": chat, "type": "private"}, "text": form["text"]}
	}
	if method != "getUpdates" {
		api.mu.Lock()
		api.calls = append(api.calls, Call{Method: method, Form: form, At: time.Now()})
		api.changed.Changed()
		api.mu.Unlock()
	}
	if !h.After(r) {
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
}

// Push makes updates available to getUpdates (their update_id is set)
// until they are confirmed; those pushed at once are handed together.
// A message's reply_to_message without a "from" gets the one Telegram
// gives it: the bot, when the bot sent that message, else the person
// of the chat.
func (api *API) Push(us ...map[string]any) {
	api.mu.Lock()
	defer api.mu.Unlock()
	for _, u := range us {
		if m, ok := u["message"].(map[string]any); ok {
			if to, ok := m["reply_to_message"].(map[string]any); ok && to["from"] == nil {
				id, _ := to["message_id"].(int)
				to["from"] = m["from"]
				if api.made[id] {
					to["from"] = map[string]any{"id": BotID(api.token), "is_bot": true, "first_name": "Agent Assistant", "username": "aa_bot"}
				}
			}
			if to, ok := m["reply_to_message"].(map[string]any); ok {
				api.fillLocked(to)
			}
		}
		if cb, ok := u["callback_query"].(map[string]any); ok {
			if m, ok := cb["message"].(map[string]any); ok {
				api.fillLocked(m)
			}
		}
		api.lastUpdate++
		u["update_id"] = api.lastUpdate
		api.updates = append(api.updates, u)
	}
	api.changed.Changed()
}

// fillLocked gives m, a message of the bot's handed with an update, the
// text and the inline keyboard it has, as Telegram does (unless the
// test gave its own). Called with api.mu held.
func (api *API) fillLocked(m map[string]any) {
	id, _ := m["message_id"].(int)
	shown, ok := api.shown[id]
	if !ok {
		return
	}
	if _, ok := m["text"]; !ok && shown[0] != "" {
		m["text"] = shown[0]
	}
	if _, ok := m["reply_markup"]; !ok && shown[1] != "" {
		var kb map[string]any
		if json.Unmarshal([]byte(shown[1]), &kb) == nil && len(kb) > 0 {
			m["reply_markup"] = kb
		}
	}
}

// Said are the texts of the messages the bot sent so far (sendMessage)
// that contain part.
func (api *API) Said(part string) []string {
	api.mu.Lock()
	defer api.mu.Unlock()
	var out []string
	for _, c := range api.calls {
		if c.Method == "sendMessage" && strings.Contains(c.Form["text"], part) {
			out = append(out, c.Form["text"])
		}
	}
	return out
}

// WaitFor waits until done, given the calls so far, holds, or ctx ends.
func (api *API) WaitFor(ctx context.Context, done func([]Call) bool) error {
	return api.await(ctx, func() bool { return done(api.calls) })
}

// Wait is the n-th call of method, once it came (within ctx).
func (api *API) Wait(ctx context.Context, method string, n int) (Call, error) {
	return apicalls.Wait(ctx, api.WaitFor, method, n)
}

// Call is the form of the n-th call of method; t fails when none came
// within 10 s.
func (api *API) Call(t testing.TB, method string, n int) map[string]string {
	t.Helper()
	return apicalls.Form(t, api.WaitFor, method, n)
}

// Callback is the update of a tap on the button with data of the
// message msg in chat, by the person chat (a private chat's ID is its
// person's).
func Callback(chat int64, msg int, data string) map[string]any {
	return map[string]any{"callback_query": map[string]any{"id": "cb" + strconv.FormatInt(chat, 10) + data,
		"from":          map[string]any{"id": chat, "is_bot": false, "first_name": "Ana"},
		"message":       map[string]any{"message_id": msg, "date": 1700000000, "chat": map[string]any{"id": chat, "type": "private"}},
		"chat_instance": "1", "data": data}}
}

// Reply is the update of a message with text in chat, by Ana, replying
// to the message to.
func Reply(chat int64, id, to int, text string) map[string]any {
	return map[string]any{"message": map[string]any{"message_id": id, "date": 1700000000, "text": text,
		"chat": map[string]any{"id": chat, "type": "private"}, "from": map[string]any{"id": chat, "is_bot": false, "first_name": "Ana"},
		"reply_to_message": map[string]any{"message_id": to, "date": 1700000000, "chat": map[string]any{"id": chat, "type": "private"}}}}
}

// Keyboard is an inline keyboard as sendMessage's reply_markup carries it.
type Keyboard struct {
	InlineKeyboard [][]Button `json:"inline_keyboard"`
}

// Button is one of its buttons.
type Button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

// KeyboardOf reads a call's reply_markup.
func KeyboardOf(form map[string]string) (Keyboard, error) {
	var kb Keyboard
	if err := json.Unmarshal([]byte(form["reply_markup"]), &kb); err != nil {
		return kb, fmt.Errorf("read reply_markup %q: %w", form["reply_markup"], err)
	}
	return kb, nil
}

// BotID is the user ID of the bot whose token is token: the number
// before its colon.
func BotID(token string) int64 {
	id, _, _ := strings.Cut(token, ":")
	n, _ := strconv.ParseInt(id, 10, 64)
	return n
}
