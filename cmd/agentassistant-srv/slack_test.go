package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// TestCheckChannelsRefused: a token the service refuses is said by
// -check-channels as the server's log says it, naming the setting to
// fix: Telegram's bot_token, and Slack's bot_token apart from its
// app_token (which a post does not try: it is checked on its own).
func TestCheckChannelsRefused(t *testing.T) {
	const tgToken, bot, app = "123456:ABC-secret-tg-token", "xoxb-7-secret-bot-token", "xapp-7-secret-app-token"
	tg := telegramtest.Start(t, "654321:other")
	sl := slacktest.Start(t, "xoxb-other", "xapp-other")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "srv.toml")
	conf := "[channels.telegram]\nbot_token = \"" + tgToken + "\"\nchats = [42]\napi_url = \"" + tg.URL + "\"\n" +
		"[channels.slack]\nbot_token = \"" + bot + "\"\napp_token = \"" + app + "\"\nchannel = \"C1\"\nusers = [\"U42\"]\napi_url = \"" + sl.APIURL() + "\"\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "2 channel(s) failed") {
		t.Fatalf("run: %v", err)
	}
	for _, want := range []string{
		"telegram: REFUSED: check [channels.telegram] bot_token (Telegram answered 401: Unauthorized)",
		"slack: REFUSED: check [channels.slack] bot_token (Slack answered invalid_auth)",
		"REFUSED: check [channels.slack] app_token (Slack answered invalid_auth)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, tok := range []string{tgToken, bot, app} {
		if strings.Contains(out.String()+errOut.String(), tok) {
			t.Errorf("a token shows:\n%s", out.String())
		}
	}
}

// TestCheckChannelsSlack: -check-channels posts through [channels.slack]
// to its channel with its bot token and says what Slack answered,
// without the tokens; a config whose tokens are not a bot's and an
// app's is refused, naming the keys and not the values.
func TestCheckChannelsSlack(t *testing.T) {
	const bot, app = "xoxb-9-secret-bot-token", "xapp-9-secret-app-token"
	var got []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		got = append(got, r.URL.Path+" "+r.PostForm.Get("channel")+" "+r.PostForm.Get("token"))
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "channel_not_found"})
	}))
	defer api.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "srv.toml")
	write := func(conf string) {
		if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("[channels.slack]\nbot_token = \"" + bot + "\"\napp_token = \"" + app + "\"\nchannel = \"C123\"\nusers = [\"U42\"]\napi_url = \"" + api.URL + "/api\"\n")
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "1 channel(s) failed") {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(out.String(), "slack: FAILED: slack: post the question to C123: channel_not_found") {
		t.Errorf("output:\n%s", out.String())
	}
	// The post, then the app token's own check (a Socket Mode connection).
	if len(got) != 2 || got[0] != "/api/chat.postMessage C123 "+bot || !strings.HasPrefix(got[1], "/api/apps.connections.open") {
		t.Errorf("Slack got %q", got)
	}

	write("[channels.slack]\nbot_token = \"" + app + "\"\napp_token = \"" + bot + "\"\nchannel = \"C123\"\nusers = [\"U42\"]\n")
	out.Reset()
	err = run(context.Background(), []string{"-config", cfg, "-data", dir, "-check-channels"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "channels.slack: bot_token (xoxb-…), app_token (xapp-…") {
		t.Fatalf("tokens swapped: %v", err)
	}
	for _, tok := range []string{bot, app} {
		if strings.Contains(out.String()+errOut.String()+err.Error(), tok) {
			t.Errorf("a token shows")
		}
	}
}
