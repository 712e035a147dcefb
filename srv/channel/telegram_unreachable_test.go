package channel

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/pipenet"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// cutPolls fails every getUpdates while down: Telegram out of reach.
type cutPolls struct {
	base http.RoundTripper
	down atomic.Bool
}

func (c *cutPolls) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.down.Load() && strings.HasSuffix(r.URL.Path, "/getUpdates") {
		return nil, errors.New("dial tcp: connection refused")
	}
	return c.base.RoundTrip(r)
}

// TestTelegramUnreachableToldOnce: Telegram out of reach for half an
// hour warned at every poll, every 5 s (360 lines). Now the log says once
// that the updates cannot be read, and once that they are read again.
func TestTelegramUnreachableToldOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := pipenet.New()
		api := telegramtest.NewOn(pipeBotToken, ln)
		t.Cleanup(api.Close)
		tr := &http.Transport{DialContext: ln.Dial}
		t.Cleanup(tr.CloseIdleConnections)
		cut := &cutPolls{base: tr}
		cut.down.Store(true)
		logs := &syncBuffer{wake: make(chan struct{}, 1)}
		log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		tg := &Telegram{BotToken: pipeBotToken, Chats: []int64{42}, ServerURL: api.URL, transport: cut, Logger: log}
		h := hub.New(hub.Options{})
		t.Cleanup(h.Close)
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {tg}}, Logger: log})
		t.Cleanup(m.Close)

		time.Sleep(30 * time.Minute)
		synctest.Wait()
		if warns := levelLines(logs, "WARN"); len(warns) != 1 || !strings.Contains(warns[0], "cannot read the bot's updates") {
			t.Fatalf("%d warnings in half an hour out of reach, want 1:\n%s", len(warns), strings.Join(warns, ""))
		}

		cut.down.Store(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := strings.Count(logs.String(), "reads the bot's updates again"); got != 1 {
			t.Errorf("%d lines saying the updates are read again, want 1:\n%s", got, logs.String())
		}
		cut.down.Store(true) // out of reach again: told again, once
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if warns := levelLines(logs, "WARN"); len(warns) != 2 {
			t.Errorf("%d warnings after a second cut, want 2:\n%s", len(warns), strings.Join(warns, ""))
		}
	})
}
