package channel

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/pipenet"
	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// levelLines are the lines of logs at level ("ERROR", "WARN").
func levelLines(logs *syncBuffer, level string) []string {
	var out []string
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "level="+level) {
			out = append(out, l)
		}
	}
	return out
}

// TestTelegramTokenRefused: a bot token Telegram refuses (401) was
// polled again every 5 s and told at every poll, forever, and each
// question tried five times, then dropped. Now the log says once which
// setting to fix and what Telegram said, the poll and the question are
// tried again every few minutes (a handful of calls in half an hour),
// and once the token is taken the question held meanwhile is sent, and
// one line says the token is accepted again.
func TestTelegramTokenRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const wrong = "123456:ABC-wrong-token"
		ln := pipenet.New()
		api := telegramtest.NewOn(pipeBotToken, ln)
		t.Cleanup(api.Close)
		tr := &http.Transport{DialContext: ln.Dial}
		t.Cleanup(tr.CloseIdleConnections)
		logs := &syncBuffer{wake: make(chan struct{}, 1)}
		log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		tg := &Telegram{BotToken: wrong, Chats: []int64{42}, ServerURL: api.URL, transport: tr, Logger: log}
		h := hub.New(hub.Options{})
		t.Cleanup(h.Close)
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {tg}}, Logger: log})
		t.Cleanup(m.Close)

		_ = askOn(t, h, "q-1")
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		// The poll and the question: the first try, then after 1, 2, 4,
		// 8 and 10 minutes, each.
		if got := api.Refused(); got > 12 {
			t.Errorf("%d calls with a refused token in 30 minutes, want at most 12", got)
		}
		errs := levelLines(logs, "ERROR")
		if len(errs) != 1 {
			t.Fatalf("%d error lines for one token refused, want 1:\n%s", len(errs), logs.String())
		}
		for _, want := range []string{"[channels.telegram] bot_token", "Telegram answered 401", "Unauthorized"} {
			if !strings.Contains(errs[0], want) {
				t.Errorf("the line says %q, not %q", errs[0], want)
			}
		}
		if warns := levelLines(logs, "WARN"); len(warns) > 0 {
			t.Errorf("a refused token warned besides:\n%s", strings.Join(warns, ""))
		}
		if strings.Contains(logs.String(), wrong) || strings.Contains(logs.String(), "ABC-wrong") {
			t.Errorf("the log holds the token:\n%s", logs.String())
		}
		st := m.States()
		if len(st) != 1 || st[0].State != "refused" || len(st[0].Refused) != 1 || st[0].Refused[0].Setting != telegramBotToken {
			t.Errorf("the channel's state is %+v, want refused, naming bot_token", st)
		}

		api.SetToken(wrong) // the token taken (made again at @BotFather)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if _, err := api.Wait(t.Context(), "sendMessage", 1); err != nil {
			t.Fatalf("the question held was not sent once the token was taken: %v", err)
		}
		if got := strings.Count(logs.String(), "accepted again"); got != 1 {
			t.Errorf("%d lines saying the token is accepted again, want 1:\n%s", got, logs.String())
		}
		if st := m.States(); st[0].State != "ok" {
			t.Errorf("the channel's state is %+v once its token is taken, want ok", st)
		}
	})
}

// TestSlackTokensRefused: Slack's invalid_auth, for the bot token that
// posts and the app token that opens Socket Mode, said neither which
// token it was nor stopped: the connection was tried again and told at
// each try. Now each refused token has its one line naming its setting,
// is tried again every few minutes, and once the app is installed again
// (the tokens taken) the question held is posted, the connection made,
// and each token told accepted again.
func TestSlackTokensRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const botToken, appToken = "xoxb-4-secret-bot-token", "xapp-4-A1-secret-app-token"
		ln := pipenet.New()
		api := slacktest.NewOn("xoxb-other", "xapp-other", ln)
		t.Cleanup(api.Close)
		tr := &http.Transport{DialContext: ln.Dial}
		t.Cleanup(tr.CloseIdleConnections)
		logs := &syncBuffer{wake: make(chan struct{}, 1)}
		log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL(),
			transport: tr, dial: ln.Dial, Logger: log}
		h := hub.New(hub.Options{})
		t.Cleanup(h.Close)
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {sl}}, Logger: log})
		t.Cleanup(m.Close)

		_ = askOn(t, h, "q-1")
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		for _, method := range []string{"apps.connections.open", "chat.postMessage"} {
			if got := api.Refused(method); got > 6 {
				t.Errorf("%s refused %d times in 30 minutes, want at most 6", method, got)
			}
		}
		errs := levelLines(logs, "ERROR")
		if len(errs) != 2 {
			t.Fatalf("%d error lines for two tokens refused, want 2:\n%s", len(errs), logs.String())
		}
		for _, setting := range []string{slackBotToken, slackAppToken} {
			if !strings.Contains(logs.String(), `setting="`+setting+`" said="Slack answered invalid_auth"`) {
				t.Errorf("no line naming %s and what Slack said:\n%s", setting, logs.String())
			}
		}
		if warns := levelLines(logs, "WARN"); len(warns) > 0 {
			t.Errorf("refused tokens warned besides:\n%s", strings.Join(warns, ""))
		}
		if st := m.States(); len(st) != 1 || len(st[0].Refused) != 2 {
			t.Errorf("the channel's state is %+v, want both tokens refused", st)
		}

		api.SetTokens(botToken, appToken) // the app installed again
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if _, err := api.Wait(t.Context(), "chat.postMessage", 1); err != nil {
			t.Fatalf("the question held was not posted once the bot token was taken: %v", err)
		}
		if err := api.Connected(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(logs.String(), "accepted again"); got != 2 {
			t.Errorf("%d lines saying a token is accepted again, want 2:\n%s", got, logs.String())
		}
		if st := m.States(); st[0].State != "ok" {
			t.Errorf("the channel's state is %+v once its tokens are taken, want ok", st)
		}
	})
}

// fakeNtfy is an ntfy server that takes publishes with the bearer token
// it is set to, and refuses others as ntfy does (403 forbidden).
type fakeNtfy struct {
	mu       sync.Mutex
	token    string
	refused  int
	accepted []string
}

func (f *fakeNtfy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+f.token {
		f.refused++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"code":40301,"http":403,"error":"forbidden","link":"https://ntfy.sh/docs/publish/#authentication"}`+"\n")
		return
	}
	b, _ := io.ReadAll(r.Body)
	f.accepted = append(f.accepted, string(b))
}

func (f *fakeNtfy) counts() (refused, accepted int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused, len(f.accepted)
}

func (f *fakeNtfy) setToken(tok string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.token = tok
}

// TestNtfyTokenRefused: ntfy's 403 was "ntfy answered 403", the topic
// or the access token, who knows, five tries a question. Now it names
// [channels.ntfy] access_token, each question after the first waits
// with it, held, a try every few minutes, and all are published once
// the token's user is granted the topic.
func TestNtfyTokenRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := pipenet.New()
		fake := &fakeNtfy{token: "tk_other"}
		srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: fake, ReadHeaderTimeout: time.Minute}}
		srv.Start()
		t.Cleanup(srv.Close)
		tr := &http.Transport{DialContext: ln.Dial}
		t.Cleanup(tr.CloseIdleConnections)
		logs := &syncBuffer{wake: make(chan struct{}, 1)}
		log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		n := &Ntfy{URL: srv.URL, Topic: "aa-secret-topic", AccessToken: "tk_secret", Client: &http.Client{Transport: tr}}
		h := hub.New(hub.Options{})
		t.Cleanup(h.Close)
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {n}}, Logger: log})
		t.Cleanup(m.Close)

		_ = askOn(t, h, "q-1")
		_ = askOn(t, h, "q-2")
		// One withdrawn while held: never published, nor its end.
		withdraw, cancel := context.WithCancel(t.Context())
		gone := make(chan struct{})
		go func() {
			defer close(gone)
			_, _ = h.Ask(withdraw, tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-gone", Text: "Gone?", Timeout: time.Hour})
		}()
		time.Sleep(5 * time.Minute)
		cancel()
		<-gone
		time.Sleep(25 * time.Minute)
		synctest.Wait()
		if refused, _ := fake.counts(); refused > 6 {
			t.Errorf("%d publishes refused in 30 minutes, want at most 6", refused)
		}
		errs := levelLines(logs, "ERROR")
		if len(errs) != 1 || !strings.Contains(errs[0], `setting="[channels.ntfy] access_token" said="ntfy answered 403: forbidden"`) {
			t.Fatalf("want one error line naming access_token and ntfy's words:\n%s", logs.String())
		}
		if strings.Contains(logs.String(), "tk_secret") || strings.Contains(logs.String(), "aa-secret-topic") {
			t.Errorf("the log holds a secret:\n%s", logs.String())
		}

		fake.setToken("tk_secret")
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if _, accepted := fake.counts(); accepted != 2 {
			t.Errorf("%d notices published once the token was taken, want the 2 questions held (not the one withdrawn)", accepted)
		}
		if got := strings.Count(logs.String(), "accepted again"); got != 1 {
			t.Errorf("%d lines saying the token is accepted again, want 1:\n%s", got, logs.String())
		}
	})
}

// TestRefusedStateEndsWhenHeldEmptied: a channel refused holds its
// question; the question withdrawn meanwhile leaves nothing held. The
// retry then found nothing to try, forgot the refusal in its queue, and
// sent the next question as if none were: taken, yet /health said the
// token refused, and no line said it was accepted again. Now the next
// question is the try, and its success ends the refusal.
func TestRefusedStateEndsWhenHeldEmptied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := pipenet.New()
		fake := &fakeNtfy{token: "tk_other"}
		srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: fake, ReadHeaderTimeout: time.Minute}}
		srv.Start()
		t.Cleanup(srv.Close)
		tr := &http.Transport{DialContext: ln.Dial}
		t.Cleanup(tr.CloseIdleConnections)
		logs := &syncBuffer{wake: make(chan struct{}, 1)}
		log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		n := &Ntfy{URL: srv.URL, Topic: "aa-topic", AccessToken: "tk_secret", Client: &http.Client{Transport: tr}}
		h := hub.New(hub.Options{})
		t.Cleanup(h.Close)
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {n}}, Logger: log})
		t.Cleanup(m.Close)

		withdraw, cancel := context.WithCancel(t.Context())
		gone := make(chan struct{})
		go func() {
			defer close(gone)
			_, _ = h.Ask(withdraw, tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-gone", Text: "Gone?", Timeout: time.Hour})
		}()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if st := m.States(); st[0].State != "refused" {
			t.Fatalf("the channel's state is %+v, want refused", st)
		}
		cancel()
		<-gone
		time.Sleep(5 * time.Minute) // past the first retry, with nothing held
		synctest.Wait()

		fake.setToken("tk_secret")
		_ = askOn(t, h, "q-2")
		time.Sleep(15 * time.Minute)
		synctest.Wait()
		if _, accepted := fake.counts(); accepted != 1 {
			t.Fatalf("%d notices published once the token was taken, want the question asked then", accepted)
		}
		if st := m.States(); st[0].State != "ok" {
			t.Errorf("the channel's state is %+v once a notice went through, want ok", st)
		}
		if got := strings.Count(logs.String(), "accepted again"); got != 1 {
			t.Errorf("%d lines saying the token is accepted again, want 1:\n%s", got, logs.String())
		}
	})
}
