package srv_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestOneTapOnTheHubsClock: a notification's button expires with its
// question, on the clock the question's deadline is on: the hub's (in a
// cluster, NATS's, which may differ from this machine's by minutes). A
// tap before the deadline is taken, though this machine's clock is past
// it.
func TestOneTapOnTheHubsClock(t *testing.T) {
	toks, err := auth.NewTokens(tokA, tokB)
	if err != nil {
		t.Fatal(err)
	}
	behind := func() time.Time { return time.Now().Add(-10 * time.Minute) }
	caps := answercap.New()
	s := srv.New(srv.Options{Tokens: toks, Caps: caps, Hub: hub.Options{Now: behind}})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.Close(); ts.Close() })

	shown := make(chan struct{}, 1)
	defer s.Hub().Subscribe(func(ev hub.Event) {
		if ev.Kind == hub.Asked && ev.Request.ID == "q" {
			shown <- struct{}{}
		}
	})()
	asked := make(chan error, 1)
	go func() {
		_, err := s.Hub().Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/src", Text: "Ship it?", Timeout: 5 * time.Minute})
		asked <- err
	}()
	select {
	case <-shown:
	case <-time.After(10 * time.Second):
		t.Fatal("the question was never asked")
	}
	// A button of its notification, as the push made it: the question's
	// deadline, on the hub's clock.
	name := caps.Make(tokA, answercap.Cap{Room: store.Room(tokA), Kind: wire.AskQuestion, ID: "q", Who: "phone", WhoID: "phone", Door: "push",
		Expires: behind().Add(5 * time.Minute)}, behind())
	resp, err := http.Post(ts.URL+"/push/answer", "application/json", strings.NewReader(`{"cap":"`+name+`","text":"Yes"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("a tap on a question 5 minutes from its deadline: %s", resp.Status)
	}
	select {
	case err := <-asked:
		if err != nil {
			t.Fatalf("Ask = %v, want the tap's answer", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Ask did not return")
	}
}
