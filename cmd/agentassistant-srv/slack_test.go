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
)

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
	if !strings.Contains(out.String(), "slack: FAILED: slack: post the question: channel_not_found") {
		t.Errorf("output:\n%s", out.String())
	}
	if len(got) != 1 || got[0] != "/api/chat.postMessage C123 "+bot {
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
