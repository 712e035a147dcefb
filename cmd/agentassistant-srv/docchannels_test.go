package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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
