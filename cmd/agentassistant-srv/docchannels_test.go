package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// TestDocChannelAPIURLs: the api_url that docs/configuration.md names as
// Telegram's and Slack's default, its host swapped for a double's, is
// one -check-channels reaches the service at. Slack's Web API lives
// under a path (/api/), which a reader pointing the channel at a proxy
// or a double must keep: given the bare host, every call is a 404.
func TestDocChannelAPIURLs(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(b), "\n"+srvBlockIntro+"\n")
	block, _, _ = strings.Cut(block, "\n```\n\n")
	defaults := map[string]string{}
	table := ""
	header := regexp.MustCompile(`^#?\s*\[([a-z.]+)\]`)
	apiURL := regexp.MustCompile(`^#?\s*api_url\s*=.*#.*?(https://\S+)`)
	for line := range strings.Lines(block) {
		if m := header.FindStringSubmatch(line); m != nil {
			table = m[1]
		} else if m := apiURL.FindStringSubmatch(line); m != nil {
			defaults[table] = m[1]
		} else if strings.Contains(line, "api_url") {
			t.Errorf("[%s] api_url's comment names no default URL: %s", table, strings.TrimSpace(line))
		}
	}
	const tgToken, bot, app = "123456:doc-tg-token", "xoxb-doc-bot-token", "xapp-doc-app-token"
	tg := telegramtest.Start(t, tgToken)
	sl := slacktest.Start(t, bot, app)
	on := func(double, doc string) string { // doc's URL at the double's address
		u := regexp.MustCompile(`^https://[^/]+`).ReplaceAllString(doc, "")
		return strings.TrimRight(double, "/") + u
	}
	tgURL, slURL := defaults["channels.telegram"], defaults["channels.slack"]
	if tgURL == "" || slURL == "" {
		t.Fatalf("configuration.md names no default api_url for Telegram (%q) or Slack (%q)", tgURL, slURL)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "srv.toml")
	conf := "[channels.telegram]\nbot_token = \"" + tgToken + "\"\nchats = [42]\napi_url = \"" + on(tg.URL, tgURL) + "\"\n" +
		"[channels.slack]\nbot_token = \"" + bot + "\"\napp_token = \"" + app + "\"\nchannel = \"C1\"\nusers = [\"U42\"]\napi_url = \"" + on(sl.URL, slURL) + "\"\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut); err != nil {
		t.Fatalf("-check-channels with the documented api_url shapes (%s, %s): %v\n%s", tgURL, slURL, err, out.String())
	}
	for _, want := range []string{"telegram: sent", "slack: sent"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestDocChannelSnippets: each channel's table in docs/channels.md,
// copied as it is, its `…` filled in and its service's address swapped
// for a double's, is one -check-channels sends through, the login it
// asks for (SMTP's and IMAP's user and password) accepted, and no
// secret of it in the output.
func TestDocChannelSnippets(t *testing.T) {
	b, err := os.ReadFile("../../docs/channels.md")
	if err != nil {
		t.Fatal(err)
	}
	const filled = "doc-filled-in-0123456789" // each … as a reader fills it in
	tables := map[string]string{}
	for _, block := range regexp.MustCompile("(?s)```toml\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		if m := regexp.MustCompile(`^\[(channels(?:\.[a-z]+)?)\]`).FindStringSubmatch(block[1]); m != nil {
			tables[m[1]] = strings.ReplaceAll(block[1], "…", filled)
		}
	}
	for _, name := range []string{"channels", "channels.ntfy", "channels.telegram", "channels.slack", "channels.email", "channels.webhook"} {
		if tables[name] == "" {
			t.Fatalf("docs/channels.md shows no [%s] table", name)
		}
	}
	setting := func(table, key string) string {
		m := regexp.MustCompile(`(?m)^` + key + `\s*=\s*"([^"]*)"`).FindStringSubmatch(tables[table])
		if m == nil {
			t.Fatalf("[%s] shows no %s", table, key)
		}
		return m[1]
	}
	swap := func(table, key, value string) {
		re := regexp.MustCompile(`(?m)^(` + key + `\s*=\s*)"[^"]*"`)
		if !re.MatchString(tables[table]) {
			t.Fatalf("[%s] shows no %s", table, key)
		}
		tables[table] = re.ReplaceAllString(tables[table], `${1}"`+value+`"`)
	}

	var ntfyGot, hookGot atomic.Int32
	ntfy := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ntfyGot.Add(1) }))
	defer ntfy.Close()
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hookGot.Add(1) }))
	defer hook.Close()
	swap("channels.ntfy", "url", ntfy.URL)
	swap("channels.webhook", "url", hook.URL)
	tg := telegramtest.Start(t, setting("channels.telegram", "bot_token"))
	tables["channels.telegram"] += "api_url = \"" + tg.URL + "\"\n"
	sl := slacktest.Start(t, setting("channels.slack", "bot_token"), setting("channels.slack", "app_token"))
	tables["channels.slack"] += "api_url = \"" + sl.URL + "/api/\"\n"

	mails := &mailSink{}
	smtpUser, smtpPass := setting("channels.email", "smtp_user"), setting("channels.email", "smtp_password")
	smtpSrv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &loginSession{mailSession{mails}, smtpUser, smtpPass}, nil
	}))
	smtpSrv.Domain, smtpSrv.AllowInsecureAuth = "localhost", true
	smtpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = smtpSrv.Serve(smtpLn) }() // ended by its Close
	defer smtpSrv.Close()
	mem := imapmemserver.New()
	user := imapmemserver.NewUser(setting("channels.email", "imap_user"), setting("channels.email", "imap_password"))
	if err := user.Create(setting("channels.email", "mailbox"), nil); err != nil {
		t.Fatal(err)
	}
	mem.AddUser(user)
	imapSrv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}},
		InsecureAuth: true,
	})
	imapLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = imapSrv.Serve(imapLn) }() // ended by its Close
	defer imapSrv.Close()
	// One tls setting serves both servers: the ports shown must be
	// the ones that speak it (a mail provider's 587 speaks STARTTLS,
	// and implicit TLS on it fails at the first byte).
	ports := map[string][2]string{"tls": {"465", "993"}, "starttls": {"587", "143"}}[setting("channels.email", "tls")]
	for i, key := range []string{"smtp_addr", "imap_addr"} {
		if _, port, _ := strings.Cut(setting("channels.email", key), ":"); port != ports[i] {
			t.Errorf("[channels.email] %s's port %s, with tls = %q, takes %s", key, port, setting("channels.email", "tls"), ports[i])
		}
	}
	swap("channels.email", "smtp_addr", smtpLn.Addr().String())
	swap("channels.email", "imap_addr", imapLn.Addr().String())
	swap("channels.email", "tls", "none") // the doubles speak no TLS

	dir := t.TempDir()
	cfg := filepath.Join(dir, "srv.toml")
	var conf strings.Builder
	for _, name := range []string{"channels", "channels.ntfy", "channels.telegram", "channels.slack", "channels.email", "channels.webhook"} {
		conf.WriteString(tables[name] + "\n")
	}
	if err := os.WriteFile(cfg, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut); err != nil {
		t.Fatalf("-check-channels with docs/channels.md's tables: %v\n%s%s\n%s", err, out.String(), errOut.String(), conf.String())
	}
	for _, want := range []string{"ntfy: sent", "telegram: sent", "slack: sent", "email: sent", "webhook: sent"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String()+errOut.String(), filled) {
		t.Errorf("the output shows a secret:\n%s%s", out.String(), errOut.String())
	}
	if ntfyGot.Load() != 1 || hookGot.Load() != 1 || len(mails.rcpts) != 1 {
		t.Errorf("ntfy had %d posts, the webhook %d, the mail %v", ntfyGot.Load(), hookGot.Load(), mails.rcpts)
	}
}

// loginSession is a mailSession that asks for the one login (AUTH PLAIN).
type loginSession struct {
	mailSession
	user, pass string
}

func (s *loginSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *loginSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != s.user || pass != s.pass {
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "Authentication credentials invalid"}
		}
		return nil
	}), nil
}

// TestCheckChannelsTelegramChatNotFound: a chat ID mistyped, or of a
// person who never wrote to the bot, is answered by Telegram 400 "Bad
// Request: chat not found" (403 once they blocked it): -check-channels
// names the chat and the setting, and how to find the right ID.
func TestCheckChannelsTelegramChatNotFound(t *testing.T) {
	const token = "123456:doc-chat-token"
	for code, said := range map[int]string{400: "Bad Request: chat not found", 403: "Forbidden: bot was blocked by the user"} {
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = fmt.Fprintf(w, `{"ok":false,"error_code":%d,"description":%q}`, code, said)
		}))
		defer api.Close()
		dir := t.TempDir()
		cfg := filepath.Join(dir, "srv.toml")
		conf := "[channels.telegram]\nbot_token = \"" + token + "\"\nchats = [987654321]\napi_url = \"" + api.URL + "\"\n"
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		if err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut); err == nil {
			t.Fatalf("-check-channels passed a chat Telegram does not know:\n%s", out.String())
		}
		for _, want := range []string{"987654321", said, "[channels.telegram] chats", "getUpdates"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%d: the output does not say %q:\n%s", code, want, out.String())
			}
		}
		if strings.Contains(out.String()+errOut.String(), token) {
			t.Errorf("the output shows the bot token")
		}
	}
}

// TestCheckChannelsHidesAnEscapedBotToken: a bot token pasted with what
// a URL escapes (a space, the `…` of the page's example) is part of the
// address an unreachable Telegram's error shows, escaped: the output
// does not show it, as it does not show the token as written.
func TestCheckChannelsHidesAnEscapedBotToken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close() // nothing answers there
	dir := t.TempDir()
	cfg := filepath.Join(dir, "srv.toml")
	conf := "[channels.telegram]\nbot_token = \"123456:secret pasted…\"\nchats = [42]\napi_url = \"" + closed + "\"\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut); err == nil {
		t.Fatalf("-check-channels reached a closed port:\n%s", out.String())
	}
	if text := out.String() + errOut.String(); strings.Contains(text, "secret") {
		t.Errorf("the output shows the bot token:\n%s", text)
	}
}

// TestCheckChannelsSlackChannelNotTheBots: a channel the bot was not
// invited to is answered "not_in_channel" by Slack's chat.postMessage,
// a channel ID mistyped (or a private channel's, the bot not in it)
// "channel_not_found": -check-channels names the channel and the
// setting, and what to do.
func TestCheckChannelsSlackChannelNotTheBots(t *testing.T) {
	const bot, app = "xoxb-doc-not-in", "xapp-doc-not-in"
	sl := slacktest.Start(t, bot, app)
	target, err := url.Parse(sl.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, said := range []string{"not_in_channel", "channel_not_found"} {
		proxy := httputil.NewSingleHostReverseProxy(target)
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/chat.postMessage") {
				proxy.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"ok":false,"error":%q}`, said)
		}))
		defer api.Close()
		dir := t.TempDir()
		cfg := filepath.Join(dir, "srv.toml")
		conf := "[channels.slack]\nbot_token = \"" + bot + "\"\napp_token = \"" + app + "\"\nchannel = \"C0DOCNOTIN\"\nusers = [\"U42\"]\napi_url = \"" + api.URL + "/api/\"\n"
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		if err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut); err == nil {
			t.Fatalf("-check-channels passed a channel Slack refused:\n%s", out.String())
		}
		for _, want := range []string{"C0DOCNOTIN", said, "[channels.slack] channel", "/invite"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: the output does not say %q:\n%s", said, want, out.String())
			}
		}
	}
}

// TestCheckChannelsEmailTLSMismatch: tls = "tls" given a server that
// speaks in the clear first (a provider's 587, which takes STARTTLS)
// fails at its first byte; -check-channels says to set "starttls" or
// use the implicit TLS port, not only what crypto/tls said.
func TestCheckChannelsEmailTLSMismatch(t *testing.T) {
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return mailSession{&mailSink{}}, nil }))
	srv.Domain = "localhost"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }() // ended by its Close
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "srv.toml")
	imapSrv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return imapmemserver.New().NewSession(), nil, nil
		},
		Caps: imap.CapSet{imap.CapIMAP4rev1: {}}, InsecureAuth: true,
	})
	imapLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = imapSrv.Serve(imapLn) }() // ended by its Close
	defer imapSrv.Close()
	conf := "[channels.email]\nsmtp_addr = \"" + ln.Addr().String() + "\"\nfrom = \"aa@example.org\"\nto = [\"ana@example.org\"]\ntls = \"tls\"\n" +
		"imap_addr = \"" + imapLn.Addr().String() + "\"\nimap_user = \"aa@example.org\"\nimap_password = \"p\"\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut); err == nil {
		t.Fatalf("-check-channels passed TLS to a server in the clear:\n%s", out.String())
	}
	for _, want := range []string{`tls = "starttls"`, "465", "143"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output does not say %q:\n%s", want, out.String())
		}
	}
}
