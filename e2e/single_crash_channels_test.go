package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentassistant/agentassistant/internal/faultproxy"
	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// A single server (the embedded store) killed with kill -9 while a
// person answers through a channel, and started again on the same data
// directory and port: agentassistant-mcp keeps the agent's call and
// re-attaches.

// startSingle runs one server on port over data with the channels'
// config, as it would be started again after a crash.
func startSingle(t *testing.T, port, data, config string) *server {
	t.Helper()
	path := filepath.Join(data, "channels.toml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("[server]\ntokens = [%q]\n%s", tokenA, config)), 0o600); err != nil {
		t.Fatal(err)
	}
	return startServerWith(t, port, data, []string{"-config", path}, tokenA)
}

// crashAsked starts a server with config, an agent asking question
// through agentassistant-mcp, waits until sent says the question went
// out, then kills the server with kill -9 and starts it again on its
// data directory: the agent's call is still waiting.
func crashAsked(t *testing.T, config func(url string) string, question string, sent func(*server)) (*server, chan callResult) {
	t.Helper()
	port, data := freePort(t), t.TempDir()
	url := "http://127.0.0.1:" + port
	s := startSingle(t, port, data, config(url))
	agent := startMCP(t, s, tokenA)
	done := askAsync(agent, question)
	sent(s)
	s.kill9(t)
	select {
	case r := <-done:
		t.Fatalf("the agent's call ended with the server: %+v %v", r.r, r.err)
	default:
	}
	return startSingle(t, port, data, config(url)), done
}

// wantAnswer waits for the agent's call to end with text.
func wantAnswer(t *testing.T, done chan callResult, text string) {
	t.Helper()
	select {
	case r := <-done:
		if r.err != nil || r.r.IsError || resultText(r.r) != text {
			t.Fatalf("the agent got %+v %v: %q, want %q", r.r, r.err, resultText(r.r), text)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("the answer never reached the agent")
	}
}

// TestSingleTelegramReplyAfterKill9: the question went to Telegram, the
// server was killed and started again; the person replies to the
// message they have: the agent gets the reply, and no one is told it was
// not taken.
func TestSingleTelegramReplyAfterKill9(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	var msg int
	_, done := crashAsked(t, func(string) string { return telegramConfig(tg.URL) }, "Deploy after the crash?", func(s *server) {
		msg = must[int](t)(strconv.Atoi(tg.Call(t, "sendMessage", 1)["sent_message_id"]))
		waitNotedHere(t, s)
	})
	tg.Push(telegramtest.Reply(chat, 601, msg, "Ship it."))
	wantAnswer(t, done, "Ship it.")
	waitConfirmed(t, tg, 1)
	for _, said := range tg.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
	if asked := tg.Said("Deploy after the crash?"); len(asked) != 1 {
		t.Errorf("the question was sent %d times", len(asked))
	}
}

// TestSingleTelegramTapAfterKill9: as above, the person taps a button of
// the message sent before the crash.
func TestSingleTelegramTapAfterKill9(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	var msg int
	var label string
	_, done := crashAsked(t, func(string) string { return telegramConfig(tg.URL) }, "Tap after the crash?", func(s *server) {
		waitNotedHere(t, s)
		form := tg.Call(t, "sendMessage", 1)
		msg = must[int](t)(strconv.Atoi(form["sent_message_id"]))
		kb := must[telegramtest.Keyboard](t)(telegramtest.KeyboardOf(form))
		label = kb.InlineKeyboard[0][0].Text
	})
	tg.Push(telegramtest.Callback(chat, msg, "a:0"))
	wantAnswer(t, done, label)
	if got := tg.Call(t, "answerCallbackQuery", 1)["text"]; got != "Answered: "+label {
		t.Errorf("the person was told %q", got)
	}
}

// TestSingleTelegramReplyUnconfirmedAtKill9: the person's reply was
// handled (the agent has it) and the server died before its next
// getUpdates confirmed it; started again, the server is handed the
// reply again: it is the person's own winning answer, taken once, and
// they are not told it was not taken.
func TestSingleTelegramReplyUnconfirmedAtKill9(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	port, data := freePort(t), t.TempDir()
	s := startSingle(t, port, data, telegramConfig(tg.URL))
	agent := startMCP(t, s, tokenA)
	done := askAsync(agent, "Confirmed after the crash?")
	msg := must[int](t)(strconv.Atoi(tg.Call(t, "sendMessage", 1)["sent_message_id"]))
	waitNotedHere(t, s)
	// The poll that would confirm the reply (update 1) waits.
	confirming, release := tg.HoldWhen("getUpdates", func(f map[string]string) bool {
		n, _ := strconv.Atoi(f["offset"])
		return n > 1
	})
	tg.Push(telegramtest.Reply(chat, 601, msg, "Ship it."))
	wantAnswer(t, done, "Ship it.")
	select {
	case <-confirming:
	case <-time.After(10 * time.Second):
		t.Fatal("the reply's confirmation never came")
	}
	s.kill9(t)
	if c := tg.Confirmed(); c >= 1 {
		t.Fatalf("update %d confirmed before the crash", c)
	}
	release()
	startSingle(t, port, data, telegramConfig(tg.URL))
	waitConfirmed(t, tg, 1)
	for _, said := range tg.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
}

// waitNotedHere waits until s has noted that its channel has the
// question, and (Telegram) which question its message asks.
func waitNotedHere(t *testing.T, s *server) {
	t.Helper()
	if !s.logw.waitFor("a question sent and noted", 10*time.Second) {
		t.Fatal("the question's message was never noted")
	}
}

// waitConfirmed waits until the double's update id is confirmed: the
// server handled it.
func waitConfirmed(t *testing.T, tg *telegramtest.API, id int) {
	t.Helper()
	for try := 0; tg.Confirmed() < id; try++ {
		if try == 3000 {
			t.Fatalf("update %d never confirmed (last %d)", id, tg.Confirmed())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ntfyDouble takes ntfy's JSON publishes and keeps them.
type ntfyDouble struct {
	*httptest.Server
	mu   sync.Mutex
	msgs []map[string]any
	more chan struct{}
}

func startNtfy(t *testing.T) *ntfyDouble {
	d := &ntfyDouble{more: make(chan struct{}, 100)}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d.mu.Lock()
		d.msgs = append(d.msgs, m)
		d.mu.Unlock()
		d.more <- struct{}{}
		_, _ = w.Write([]byte(`{"id":"x"}`))
	}))
	t.Cleanup(d.Close)
	return d
}

// published is the n-th message published, once it came.
func (d *ntfyDouble) published(t *testing.T, n int) map[string]any {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		d.mu.Lock()
		var m map[string]any
		if len(d.msgs) >= n {
			m = d.msgs[n-1]
		}
		d.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-d.more:
		case <-deadline:
			t.Fatalf("message %d was never published to ntfy", n)
		}
	}
}

// action is the first http action of the first message published: its
// URL and its body.
func (d *ntfyDouble) action(t *testing.T) (string, string) {
	t.Helper()
	m := d.published(t, 1)
	acts, _ := m["actions"].([]any)
	for _, a := range acts {
		a := a.(map[string]any)
		if a["action"] == "http" {
			return a["url"].(string), a["body"].(string)
		}
	}
	t.Fatalf("no http action in %v", m)
	return "", ""
}

// TestSingleOneTapAfterKill9: a notification's one-tap answer, made
// before the crash, is tapped after it: the answer is taken and reaches
// the agent; tapped again, it is refused (good once).
func TestSingleOneTapAfterKill9(t *testing.T) {
	nt := startNtfy(t)
	var url, body string
	_, done := crashAsked(t, func(public string) string {
		return fmt.Sprintf("[channels]\npublic_url = %q\n[channels.ntfy]\nurl = %q\ntopic = \"aa-crash\"\n", public, nt.URL)
	}, "One tap after the crash?", func(*server) { url, body = nt.action(t) })
	post := func() (int, string) {
		resp, err := http.Post(url, "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var label struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal([]byte(body), &label); err != nil {
		t.Fatal(err)
	}
	if code, said := post(); code != http.StatusOK {
		t.Fatalf("the tap after the restart: %d %s", code, strings.TrimSpace(said))
	}
	wantAnswer(t, done, label.Text)
	if code, said := post(); code == http.StatusOK {
		t.Fatalf("the same tap again: %d %s", code, said)
	}
}

// TestSingleTelegramAskedAtKill9: the question is saved (the agent's
// call waits) and its Telegram message is on its way when the server is
// killed; started again, the server sends it, and the person's reply to
// that message answers the agent.
func TestSingleTelegramAskedAtKill9(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	sending, release := tg.Hold("sendMessage")
	s2, done := crashAsked(t, func(string) string { return telegramConfig(tg.URL) }, "Sent after the crash?", func(*server) {
		select {
		case <-sending:
		case <-time.After(10 * time.Second):
			t.Fatal("the question never went to Telegram")
		}
	})
	// The dead server's call, held with the new one's, may still come
	// through (its connection not yet seen closed): the person then has
	// the question twice, and a reply to the one the dead server never
	// noted is told it asks nothing. They reply to each.
	release()
	waitNotedHere(t, s2)
	var msgs []int
	_ = tg.WaitFor(context.Background(), func(calls []telegramtest.Call) bool {
		for _, c := range calls {
			if c.Method == "sendMessage" && strings.Contains(c.Form["text"], "Sent after the crash?") {
				msgs = append(msgs, must[int](t)(strconv.Atoi(c.Form["sent_message_id"])))
			}
		}
		return true
	})
	if len(msgs) == 0 {
		t.Fatal("the question was not sent after the restart")
	}
	t.Logf("the question was sent %d times", len(msgs))
	for i, msg := range msgs {
		tg.Push(telegramtest.Reply(chat, 601+i, msg, "Now I see it."))
	}
	wantAnswer(t, done, "Now I see it.")
}

// TestSingleAnswerWithPhotoKeptAcrossKill9: the agent's link is cut, the
// person answers on Telegram with a photo and a caption, and the server
// is killed once it has taken the reply; started again, the agent's
// call re-attaches and gets both, the image byte for byte.
func TestSingleAnswerWithPhotoKeptAcrossKill9(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	port, data := freePort(t), t.TempDir()
	s := startSingle(t, port, data, telegramConfig(tg.URL))
	proxy, err := faultproxy.Start(net.JoinHostPort(s.Host, s.Port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	host, pport, _ := net.SplitHostPort(proxy.Addr())
	agent := startMCP(t, &server{Host: host, Port: pport}, tokenA)
	done := askAsync(agent, "Which layout?")
	msg := must[int](t)(strconv.Atoi(tg.Call(t, "sendMessage", 1)["sent_message_id"]))
	waitNotedHere(t, s)

	proxy.SetDown(true)
	pic := photoPNG(t, color.RGBA{R: 200, A: 255})
	tg.AddFile("ph-1", pic.Bytes())
	tg.Push(map[string]any{"message": map[string]any{"message_id": 500, "date": 1700000000, "caption": "This one.",
		"photo":            []any{map[string]any{"file_id": "ph-1", "file_unique_id": "b", "width": 4, "height": 4, "file_size": pic.Len()}},
		"chat":             map[string]any{"id": chat, "type": "private"},
		"from":             map[string]any{"id": chat, "is_bot": false, "first_name": "Ana"},
		"reply_to_message": map[string]any{"message_id": msg, "date": 1700000000, "chat": map[string]any{"id": chat, "type": "private"}}}})
	waitConfirmed(t, tg, 1) // handled: its answer saved
	s.kill9(t)
	startSingle(t, port, data, telegramConfig(tg.URL))
	proxy.SetDown(false)

	select {
	case r := <-done:
		if r.err != nil || r.r.IsError || resultText(r.r) != "This one." {
			t.Fatalf("the agent got %+v %v: %q", r.r, r.err, resultText(r.r))
		}
		var got []byte
		for _, c := range r.r.Content {
			if ic, ok := mcp.AsImageContent(c); ok {
				got, _ = base64.StdEncoding.DecodeString(ic.Data)
			}
		}
		if !bytes.Equal(got, pic.Bytes()) {
			t.Errorf("the agent's image: %d bytes, want the photo's %d", len(got), pic.Len())
		}
	case <-time.After(45 * time.Second):
		t.Fatal("the answer never reached the agent")
	}
	for _, said := range tg.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
}

// TestSingleSlackReplyAfterKill9: the question was posted to Slack, the
// server was killed and started again; the person's reply in its thread,
// sent over the new Socket Mode connection, answers the agent.
func TestSingleSlackReplyAfterKill9(t *testing.T) {
	const slBot, slApp = "xoxb-e2e-crash-bot-token", "xapp-1-A1-e2e-crash-app-token"
	sl := slacktest.Start(t, slBot, slApp)
	config := fmt.Sprintf("[channels.slack]\nbot_token = %q\napp_token = %q\nchannel = \"U42\"\nusers = [\"U42\"]\napi_url = %q\n", slBot, slApp, sl.APIURL())
	var ts string
	_, done := crashAsked(t, func(string) string { return config }, "Posted before the crash?", func(s *server) {
		ts = sl.Call(t, "chat.postMessage", 1)["_ts"]
		waitNotedHere(t, s)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sl.Dialled(ctx, 2); err != nil {
		t.Fatal(err)
	}
	sl.Envelope(t, "events_api", slacktest.ThreadReply("U42", slacktest.DM("U42"), ts, "Ship it."))
	wantAnswer(t, done, "Ship it.")
	_ = sl.WaitFor(ctx, func(calls []slacktest.Call) bool {
		for _, c := range calls {
			if c.Method == "chat.postMessage" && strings.Contains(c.Form["text"], "Not taken") {
				t.Errorf("the person was told %q", c.Form["text"])
			}
		}
		return true
	})
}
