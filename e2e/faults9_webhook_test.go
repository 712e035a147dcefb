//go:build unix

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
)

// TestFaults9WebhookAskedAgainWhenTakenOver: in a cluster of three, the
// webhook receiver answers the instance that asked a question (A) 503,
// and A is killed (kill -9) as it waits to try again; the agent
// re-attaches through agentassistant-mcp -server a,b,c, and the
// instance it re-attaches through, taking the request over, posts the
// question once A's claim on sending it has lapsed: the receiver has
// exactly one asked event of it, and its signed answer reaches the
// agent.
func TestFaults9WebhookAskedAgainWhenTakenOver(t *testing.T) {
	const secret = "a-faults9-webhook-secret"
	hooks := startHookLog(t)
	busy := make(chan struct{}, 1)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		select {
		case busy <- struct{}{}:
		default:
		}
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	ns := natstest.Start(t)
	config := func(url string) string {
		return fmt.Sprintf("[channels.webhook]\nid = \"n8n\"\nurl = %q\nsecret = %q\n", url, secret)
	}
	// The receiver answers A, and A alone, 503.
	a := startInstanceConfig(t, ns.URL(), "a", config(down.URL))
	b := startInstanceConfig(t, ns.URL(), "b", config(hooks.URL()))
	c := startInstanceConfig(t, ns.URL(), "c", config(hooks.URL()))
	var list []string
	for _, s := range []*server{a, b, c} {
		list = append(list, s.Host+":"+s.Port)
	}
	agent := startMCP(t, a, tokenA, "-server", strings.Join(list, ","))
	done := askAsync(agent, "Posted though A died?")
	select {
	case <-busy:
	case r := <-done:
		t.Fatalf("the agent's call ended: %+v %v", r.r, r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("A never tried to post the question")
	}
	a.kill9(t)

	asked := hooks.waitAsked(t, 1, 90*time.Second)
	signed, _ := asked["answer"].(map[string]any)["signed"].(string)
	if code, msg := postSigned(t, b.URL+signed, secret, fmt.Sprintf(`{"id":%q,"text":"Yes."}`, asked["id"])); code != http.StatusOK {
		t.Fatalf("the signed answer through B: %d %s", code, msg)
	}
	wantAnswer(t, done, "Yes.")
	hooks.waitType(t, "answered")
	if n := hooks.count("asked"); n != 1 {
		t.Fatalf("the receiver had %d asked events of the question, want 1", n)
	}
	t.Logf("webhook: the asker killed -9 in its retry wait; the question posted once, by the instance that took it over")
}

// hookLog is a webhook receiver that keeps every event posted to it.
type hookLog struct {
	srv    *httptest.Server
	mu     sync.Mutex
	events []map[string]any
	more   chan struct{}
}

func startHookLog(t *testing.T) *hookLog {
	h := &hookLog{more: make(chan struct{}, 1)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e map[string]any
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &e) != nil {
			http.Error(w, "not JSON", http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.events = append(h.events, e)
		h.mu.Unlock()
		select {
		case h.more <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookLog) URL() string { return h.srv.URL }

// count is how many events of type typ were posted.
func (h *hookLog) count(typ string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range h.events {
		if e["type"] == typ {
			n++
		}
	}
	return n
}

// waitAsked waits, up to within, for the n-th asked event, and returns it.
func (h *hookLog) waitAsked(t *testing.T, n int, within time.Duration) map[string]any {
	t.Helper()
	deadline := time.After(within)
	for {
		h.mu.Lock()
		seen := 0
		for _, e := range h.events {
			if e["type"] == "asked" {
				if seen++; seen == n {
					h.mu.Unlock()
					return e
				}
			}
		}
		h.mu.Unlock()
		select {
		case <-h.more:
		case <-deadline:
			t.Fatalf("asked event %d was never posted", n)
		}
	}
}

// waitType waits for an event of type typ.
func (h *hookLog) waitType(t *testing.T, typ string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for h.count(typ) == 0 {
		select {
		case <-h.more:
		case <-deadline:
			t.Fatalf("no %s event was posted", typ)
		}
	}
}
