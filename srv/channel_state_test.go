package srv_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/channel"
)

// TestHealthShowsRefusedChannel: a channel whose credential its service
// refuses showed nowhere but in the log. /health (with the token) now
// lists the channels' states, the refused one naming the setting to
// check and what the service said, and /metrics counts it; neither
// holds the token, and the server stays healthy (a balancer has no
// reason to send no one).
func TestHealthShowsRefusedChannel(t *testing.T) {
	const wrong = "123456:ABC-secret-wrong-token"
	api := telegramtest.Start(t, "654321:other")
	tg := &channel.Telegram{BotToken: wrong, Chats: []int64{42}, ServerURL: api.URL}
	_, base := newGuarded(t, srv.Options{Channels: &channel.Options{Routes: map[string][]channel.Channel{tokA: {tg}}}})
	get := func(path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+tokA)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var health struct {
		Status   string          `json:"status"`
		Channels []channel.State `json:"channels"`
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		code, body := get("/health")
		if code != http.StatusOK {
			t.Fatalf("/health: %d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &health); err != nil {
			t.Fatal(err)
		}
		if len(health.Channels) == 1 && health.Channels[0].State == "refused" {
			if strings.Contains(body, wrong) || strings.Contains(body, "ABC-secret") {
				t.Errorf("/health shows the token: %s", body)
			}
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("/health never showed the channel refused: %s", body)
		}
	}
	c := health.Channels[0]
	if c.Channel != "telegram" || len(c.Refused) != 1 || c.Refused[0].Setting != "[channels.telegram] bot_token" ||
		!strings.Contains(c.Refused[0].Said, "401") || health.Status != "healthy" {
		t.Errorf("/health says %+v", health)
	}
	code, body := get("/metrics")
	if code != http.StatusOK || !strings.Contains(body, `agentassistant_channel_credentials_refused{channel="telegram"} 1`) {
		t.Errorf("/metrics (%d) does not count the credential refused:\n%s", code, body)
	}
}
