package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestDoorsAreAFixedList: a door the metrics do not know (what a client
// might put there) is counted as "other", so no label grows with input;
// after Close the hub's events are no longer counted.
func TestDoorsAreAFixedList(t *testing.T) {
	h := hub.New(hub.Options{})
	defer h.Close()
	m := New(Options{Hub: h, Connections: map[string]func() int{"ws": func() int { return 3 }}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := h.Ask(ctx, "tok", hub.Request{Kind: wire.AskQuestion, ID: "q1", Text: "?", Timeout: time.Hour, Door: "a door of its own\n"})
		done <- err
	}()
	for h.Cancel(context.Background(), "tok", "q1") != nil { // until the request is there
		select {
		case err := <-done:
			t.Fatalf("ask ended first: %v", err)
		default:
		}
	}
	<-done
	m.Close()
	_ = h.Cancel(context.Background(), "tok", "none")

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`agentassistant_requests_total{door="other",event="asked"} 1`,
		`agentassistant_requests_total{door="other",event="withdrawn"} 1`,
		`agentassistant_connections{door="ws"} 3`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
	if strings.Contains(string(body), "a door of its own") {
		t.Error("a door's name from the request became a label")
	}
}
