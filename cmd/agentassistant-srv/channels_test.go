package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-smtp"

	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/srv/channel"
)

// TestCheckChannels: -check-channels sends a test message through each
// channel and says, in words, which failed and why, without its secrets;
// it fails when one did.
func TestCheckChannels(t *testing.T) {
	var got []string
	ntfy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	defer ntfy.Close()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such hook", http.StatusNotFound)
	}))
	defer hook.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "srv.toml")
	conf := "[channels.ntfy]\nurl = \"" + ntfy.URL + "\"\ntopic = \"t\"\naccess_token = \"tk_secret_value\"\n" +
		"[channels.webhook]\nurl = \"" + hook.URL + "\"\nsecret = \"a-webhook-secret-value\"\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "1 channel(s) failed") {
		t.Fatalf("run: %v", err)
	}
	text := out.String()
	for _, want := range []string{"ntfy: sent", "webhook: FAILED: webhook answered 404: no such hook", "[channels] public_url is not set", "as your phone reaches it"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	for _, secret := range []string{"tk_secret_value", "a-webhook-secret-value"} {
		if strings.Contains(text+errOut.String(), secret) {
			t.Errorf("the output shows a secret")
		}
	}
	if len(got) != 1 || got[0] != "Bearer tk_secret_value" {
		t.Errorf("ntfy got %v", got)
	}
}

// mailSink is an SMTP server (go-smtp) that keeps the mails it is given.
type mailSink struct {
	mu    sync.Mutex
	rcpts []string
	data  []byte
}

type mailSession struct{ s *mailSink }

func (m mailSession) Mail(string, *smtp.MailOptions) error { return nil }
func (m mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	m.s.rcpts = append(m.s.rcpts, to)
	return nil
}
func (m mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	m.s.data = b
	return err
}
func (mailSession) Reset()        {}
func (mailSession) Logout() error { return nil }

// TestCheckChannelsEmail: -check-channels mails its test message to the
// configured recipients through the SMTP server. The mail asks nothing:
// no server process waits for a reply to it, so it does not invite one
// ("Reply to this e-mail to answer") and says a reply answers nothing.
func TestCheckChannelsEmail(t *testing.T) {
	sink := &mailSink{}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return mailSession{sink}, nil }))
	srv.Domain = "localhost"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "srv.toml")
	conf := "[channels.email]\nsmtp_addr = \"" + ln.Addr().String() + "\"\nfrom = \"aa@example.org\"\nto = [\"ana@example.org\"]\ntls = \"none\"\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "email: sent") {
		t.Errorf("output:\n%s", out.String())
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.rcpts) != 1 || sink.rcpts[0] != "ana@example.org" || !strings.Contains(string(sink.data), "A test from agentassistant") {
		t.Errorf("mailed to %v:\n%s", sink.rcpts, sink.data)
	}
	if body := string(sink.data); strings.Contains(body, "Reply to this e-mail to answer") || !strings.Contains(body, "answers nothing") {
		t.Errorf("the test mail invites a reply nothing takes:\n%s", body)
	}
}

// TestCheckChannelsWithoutChannels: with no channel set, -check-channels
// says where the channels are explained, in a page that explains them.
func TestCheckChannelsWithoutChannels(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "srv.toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`docs/[a-z-]+\.md`).FindString(out.String())
	if m == "" {
		t.Fatalf("-check-channels without channels says %q: no page to read", out.String())
	}
	page, err := os.ReadFile("../../" + m)
	if err != nil || !strings.Contains(string(page), "[channels.ntfy]") {
		t.Errorf("-check-channels points to %s, which does not explain the channels (%v)", m, err)
	}
	if !strings.Contains(out.String(), "[channels.") {
		t.Errorf("-check-channels says %q, not which tables to add", out.String())
	}
	if !strings.Contains(out.String(), cfg) {
		t.Errorf("-check-channels says %q, not which file it read (%s)", out.String(), cfg)
	}
}

// TestCheckChannelsWithoutConfigFile: with no config file at all,
// -check-channels names where it looked, so the newcomer knows where to
// write the channel's table.
func TestCheckChannelsWithoutConfigFile(t *testing.T) {
	home, wd := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Chdir(wd)
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"-data", t.TempDir(), "-check-channels"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{"./agentassistant-srv.toml", filepath.Join(home, ".config", "agentassistant", "agentassistant-srv.toml")} {
		if !strings.Contains(out.String(), where) {
			t.Errorf("-check-channels without a config file says %q, not that it looked for %s", out.String(), where)
		}
	}
}

// TestChannelsGetTheLogger: every channel that logs (a webhook its
// refused answers, the chats and e-mail their replies) is given the
// server's logger.
func TestChannelsGetTheLogger(t *testing.T) {
	cfg := &fileConfig{Token: "tok-0123456789abcdef"}
	cfg.Channels.Webhook = &webhookConfig{URL: "http://127.0.0.1:1/hook", Secret: "a-webhook-secret-value"}
	cfg.Channels.Telegram = &telegramConfig{BotToken: "1:x", Chats: []int64{1}}
	cfg.Channels.Slack = &slackConfig{BotToken: "xoxb-x", AppToken: "xapp-x", Channel: "C1", Users: []string{"U1"}}
	cfg.Channels.Email = &emailConfig{SMTPAddr: "127.0.0.1:1", From: "aa@example.org", To: []string{"ana@example.org"}}
	log := slog.New(slog.DiscardHandler)
	o, err := channelOptions(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range o.Routes[cfg.Token] {
		var got *slog.Logger
		switch c := c.(type) {
		case *channel.Webhook:
			got = c.Logger
		case *channel.Telegram:
			got = c.Logger
		case *channel.Slack:
			got = c.Logger
		case *channel.Email:
			got = c.Logger
		default:
			continue
		}
		if got != log {
			t.Errorf("%s has no logger", c.Name())
		}
	}
}

// TestCheckChannelsPublicURLNote: Telegram's buttons come back through the
// bot's own poll, so without [channels] public_url they still answer, and
// -check-channels does not say they are missing; ntfy's post to
// public_url, so there it does, naming ntfy.
func TestCheckChannelsPublicURLNote(t *testing.T) {
	tg := telegramtest.Start(t, "123456:ABCdef")
	ntfy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ntfy.Close()
	check := func(conf string) string {
		t.Helper()
		dir := t.TempDir()
		cfg := filepath.Join(dir, "srv.toml")
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		if err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut); err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		return out.String()
	}
	telegram := "[channels.telegram]\nbot_token = \"123456:ABCdef\"\nchats = [123456789]\napi_url = \"" + tg.URL + "\"\n"
	if text := check(telegram); !strings.Contains(text, "telegram: sent") || strings.Contains(text, "public_url") {
		t.Errorf("Telegram alone:\n%s", text)
	}
	if text := check(telegram + "[channels.ntfy]\nurl = \"" + ntfy.URL + "\"\ntopic = \"t\"\n"); !strings.Contains(text, "public_url is not set: ntfy") {
		t.Errorf("with ntfy:\n%s", text)
	}
}

// TestCheckChannelsTestInvitesNoAnswer: -check-channels' message on
// Telegram and Slack asks nothing, so it offers nothing to answer with:
// no buttons, no line asking to tap one or to reply, and its title does
// not say it asks.
func TestCheckChannelsTestInvitesNoAnswer(t *testing.T) {
	const tgToken, slBot, slApp = "123456:ABC-check", "xoxb-check", "xapp-1-A1-check"
	tg := telegramtest.Start(t, tgToken)
	sl := slacktest.Start(t, slBot, slApp)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "srv.toml")
	conf := fmt.Sprintf("[channels.telegram]\nbot_token = %q\nchats = [42]\napi_url = %q\n"+
		"[channels.slack]\nbot_token = %q\napp_token = %q\nchannel = \"U42\"\nusers = [\"U42\"]\napi_url = %q\n",
		tgToken, tg.URL, slBot, slApp, sl.APIURL())
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	sent := tg.Call(t, "sendMessage", 1)
	if kb, err := telegramtest.KeyboardOf(sent); err == nil && len(kb.InlineKeyboard) > 0 {
		t.Errorf("Telegram's test message has buttons: %s", sent["reply_markup"])
	}
	if strings.Contains(sent["text"], " asks</b>") || strings.Contains(sent["text"], "Tap an answer") || strings.Contains(sent["text"], "reply to this message") {
		t.Errorf("Telegram's test message invites an answer: %q", sent["text"])
	}
	posted := sl.Call(t, "chat.postMessage", 1)
	blocks, err := slacktest.BlocksOf(posted)
	if err != nil || len(blocks) == 0 {
		t.Fatalf("Slack's test message: %v (%v)", posted, err)
	}
	if got := slacktest.Buttons(blocks); len(got) > 0 || len(blocks) != 1 {
		t.Errorf("Slack's test message has buttons %q (blocks %s)", got, posted["blocks"])
	}
	if strings.HasSuffix(posted["text"], " asks") || strings.Contains(blocks[0].Text.Text, " asks\n") || strings.Contains(blocks[0].Text.Text, "Press an answer") || strings.Contains(blocks[0].Text.Text, "reply in this message's thread") {
		t.Errorf("Slack's test message invites an answer: %q", blocks[0].Text.Text)
	}
	// Run again, it sends the same: no word of a copy sent before.
	out.Reset()
	if err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut); err != nil {
		t.Fatalf("run again: %v\n%s", err, out.String())
	}
	if again := tg.Call(t, "sendMessage", 2); again["text"] != sent["text"] {
		t.Errorf("Telegram's second test message reads %q, the first %q", again["text"], sent["text"])
	}
	if again := sl.Call(t, "chat.postMessage", 2); again["blocks"] != posted["blocks"] {
		t.Errorf("Slack's second test message is %s, the first %s", again["blocks"], posted["blocks"])
	}
}

// TestCheckChannelsUnreachable: a Telegram or Slack API this machine
// cannot reach (no network, a mistyped api_url) is said to be out of
// reach, with what to check, not only as the Go error's chain.
func TestCheckChannelsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close() // nothing listens there now: the connection is refused
	checkUnreachable(t, closed, ln.Addr().String())
	// A name no resolver finds (RFC 6761's .invalid).
	checkUnreachable(t, "http://aa-check.invalid", "aa-check.invalid")
}

// checkUnreachable runs -check-channels with Telegram's and Slack's API
// at apiURL, which cannot be reached, and wants each failure to say it
// cannot reach host.
func checkUnreachable(t *testing.T, apiURL, host string) {
	t.Helper()
	closed := apiURL
	dir := t.TempDir()
	cfg := filepath.Join(dir, "srv.toml")
	conf := fmt.Sprintf("[channels.telegram]\nbot_token = \"123456:ABC…\"\nchats = [42]\napi_url = %q\n"+
		"[channels.slack]\nbot_token = \"xoxb-x\"\napp_token = \"xapp-1-x\"\nchannel = \"U42\"\nusers = [\"U42\"]\napi_url = %q\n",
		closed, closed+"/api/")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut); err == nil {
		t.Fatalf("run: no error\n%s", out.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.Contains(line, "cannot reach "+host+":") {
			t.Errorf("the line %q does not say %s cannot be reached", line, host)
		}
	}
	for _, secret := range []string{"123456:ABC", "ABC%E2%80%A6", "xoxb-x", "xapp-1-x"} {
		if strings.Contains(out.String()+errOut.String(), secret) {
			t.Errorf("the output shows a token: %s", out.String())
		}
	}
}
