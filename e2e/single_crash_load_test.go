package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// TestSingleKill9UnderLoad: thirty times, three agents ask one question
// after another, a device answers each, every question also goes to
// Telegram (the channels' notes written meanwhile), and the server is
// killed with kill -9 at a moment of its busiest writing. Each time it
// starts again on its data directory and says it lost nothing; at the
// end every answer an agent was given is still given to that agent
// re-attaching by ID.
func TestSingleKill9UnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("thirty kill -9 rounds")
	}
	tg := telegramtest.Start(t, tgToken)
	port, data := freePort(t), t.TempDir()
	rounds, agents := 30, 3
	if n, err := strconv.Atoi(os.Getenv("AA_KILL_ROUNDS")); err == nil {
		rounds = n // fewer, to look at one
	}
	given := map[string]string{} // request ID → the answer its agent was given
	var mu sync.Mutex
	question := func(id string) string { return "Load question " + id + "?" }
	for round := range rounds {
		s := startSingle(t, port, data, telegramConfig(tg.URL))
		if line := restoredLine(s); !strings.Contains(line, "lost=0") {
			t.Fatalf("round %d: %s", round, line)
		}
		device := dial(t, s, tokenA, "phone")
		go answerAll(device)
		ctx, cancel := context.WithCancel(context.Background())
		answered := make(chan struct{}, 1024)
		var wg sync.WaitGroup
		for a := range agents {
			wg.Go(func() {
				for n := 0; ctx.Err() == nil; n++ {
					id := fmt.Sprintf("load-%d-%d-%d", round, a, n)
					r, err := connectAsk(ctx, s, id, question(id))
					if err != nil {
						return
					}
					mu.Lock()
					given[id] = r.GetContents()[0].GetText().GetText()
					mu.Unlock()
					select {
					case answered <- struct{}{}:
					default:
					}
				}
			})
		}
		// Killed after a number of answers drawn at random, while the
		// next are being written.
		for range 1 + rand.IntN(100) {
			select {
			case <-answered:
			case <-time.After(30 * time.Second):
				t.Fatalf("round %d: no answer for 30 s", round)
			}
		}
		s.kill9(t)
		cancel()
		wg.Wait()
		device.Close()
	}
	s := startSingle(t, port, data, telegramConfig(tg.URL))
	if line := restoredLine(s); !strings.Contains(line, "lost=0") {
		t.Fatalf("after the last round: %s", line)
	}
	if len(given) < rounds {
		t.Fatalf("only %d answers were given in %d rounds", len(given), rounds)
	}
	for id, text := range given {
		if text != "A:"+id {
			t.Errorf("%s: the agent was given %q", id, text)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := connectAsk(ctx, s, id, question(id))
		cancel()
		if err != nil || r.GetContents()[0].GetText().GetText() != text {
			t.Errorf("%s: re-attaching after the crashes got %v, %v; want %q", id, r, err, text)
		}
	}
	t.Logf("%d rounds, %d answers given, each given again after the crashes; %d questions sent to Telegram", rounds, len(given), len(tg.Said("Load question")))
}

// restoredLine is the server's log line that says what it restored.
func restoredLine(s *server) string {
	for line := range strings.Lines(s.logw.String()) {
		if strings.Contains(line, "restored requests") {
			return strings.TrimSpace(line)
		}
	}
	return "no line says what was restored"
}

// answerAll answers every question c is shown with "A:" and its ID,
// until its connection ends.
func answerAll(c *wstest.Client) {
	for {
		m, err := c.Next(time.Minute)
		if err != nil {
			return
		}
		if m.Cmd == "AskQuestion" {
			id := m.GetAskQuestionRequest().GetID()
			if err := c.Send(wstest.TextReply(id, "A:"+id)); err != nil {
				return
			}
		}
	}
}
