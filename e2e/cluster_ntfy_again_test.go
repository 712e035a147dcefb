//go:build unix

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
)

// TestClusterNtfyAskedAgainWhenTakenOver: in a cluster of three, the
// instance that asked a question (A) is told 503 by ntfy and is killed
// (kill -9) as it waits to try again; the agent re-attaches through
// agentassistant-mcp -server a,b,c, and the instance it re-attaches
// through, taking the request over, sends the question once A's claim
// on sending it has lapsed: ntfy has exactly one message of it, whose
// one-tap answer reaches the agent.
func TestClusterNtfyAskedAgainWhenTakenOver(t *testing.T) {
	nt := startNtfy(t)
	busy := make(chan struct{}, 1)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		select {
		case busy <- struct{}{}:
		default:
		}
		http.Error(w, `{"code":50301,"http":503,"error":"service unavailable"}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	ns := natstest.Start(t)
	config := func(url string) string {
		return fmt.Sprintf("[channels]\npublic_url = \"https://aa.example\"\n[channels.ntfy]\nurl = %q\ntopic = \"aa-again\"\n", url)
	}
	// ntfy answers A, and A alone, 503.
	a := startInstanceConfig(t, ns.URL(), "a", config(down.URL))
	b := startInstanceConfig(t, ns.URL(), "b", config(nt.URL))
	c := startInstanceConfig(t, ns.URL(), "c", config(nt.URL))
	var list []string
	for _, s := range []*server{a, b, c} {
		list = append(list, s.Host+":"+s.Port)
	}
	agent := startMCP(t, a, tokenA, "-server", strings.Join(list, ","))
	done := askAsync(agent, "Told though A died?")
	select {
	case <-busy:
	case r := <-done:
		t.Fatalf("the agent's call ended: %+v %v", r.r, r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("A never tried to send the question")
	}
	a.kill9(t)

	path, body := nt.tapWithin(t, 1, 90*time.Second)
	_, rest, _ := strings.Cut(body, `"text":"`)
	label, _, _ := strings.Cut(rest, `"`)
	if code, said := postTap(t, b, path, body); code != http.StatusOK {
		t.Fatalf("the tap through B: %d %s", code, said)
	}
	wantAnswer(t, done, label)
	// The question's message, then its settled update: one of each
	// kind, the question's never twice.
	nt.published(t, 2)
	if n := nt.questions(); n != 1 {
		t.Fatalf("ntfy had %d messages of the question, want 1", n)
	}
	t.Logf("ntfy: the asker killed -9 in its retry wait; the question sent once, by the instance that took it over")
}

// tapWithin is tap, waiting up to within.
func (d *ntfyDouble) tapWithin(t *testing.T, n int, within time.Duration) (string, string) {
	t.Helper()
	deadline := time.After(within)
	for d.questions() < n {
		select {
		case <-d.more:
		case <-deadline:
			t.Fatalf("question %d was never published to ntfy", n)
		}
	}
	return d.tap(t, n)
}

// questions counts the messages published that ask (those with a
// one-tap answer).
func (d *ntfyDouble) questions() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, m := range d.msgs {
		acts, _ := m["actions"].([]any)
		for _, a := range acts {
			if a.(map[string]any)["action"] == "http" {
				n++
				break
			}
		}
	}
	return n
}
