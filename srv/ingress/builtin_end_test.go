package ingress_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/ingress"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// TestBuiltinEndAnswersQueuedMessages: an agent.message that carries an
// id and was queued for the run when it ended (here: the agent yielded
// while the run was still streaming its earlier message) is answered, as
// a queued tool.call is: the agent hears that the run ended and nothing
// reached the client, rather than waiting out its grace for nothing.
func TestBuiltinEndAnswersQueuedMessages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, info, l := newBuiltin(t)
		evs := make(chan ingress.Event) // unbuffered: the run waits in emit until the test reads
		ids, errs := make(chan string, 1), make(chan error, 1)
		req := ingress.InvokeRequest{Session: info, SessionID: info.SessionID, UserID: info.UserID, Message: ingress.ChatMessage{Role: "user", Content: "go"}}
		go func() {
			errs <- b.Invoke(context.Background(), req, func(id string) { ids <- id }, func(ev ingress.Event) { evs <- ev })
		}()
		id := <-ids
		if _, ok := l.NextUserMessage(context.Background()); !ok {
			t.Fatal("no message")
		}
		type posted struct {
			env    relay.Envelope
			failed bool
		}
		post := func(text string) <-chan posted {
			out := make(chan posted, 1)
			go func() {
				env, failed := l.Post(context.Background(), wire.TypeAgentMessage, json.RawMessage(`{"text":"`+text+`"}`), time.Minute)
				out <- posted{env, failed}
			}()
			return out
		}
		post("one")
		synctest.Wait() // the run streams "one": it waits in emit
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go l.NextUserMessage(ctx) // the agent yields the turn
		synctest.Wait()
		two := post("two") // queued behind the yield
		synctest.Wait()
		if ev := <-evs; ev.Type != wire.IngressDelta || ev.Text != "one" {
			t.Fatalf("event %+v, want the delta one", ev)
		}
		if ev := <-evs; ev.Type != wire.IngressDone {
			t.Fatalf("event %+v, want done", ev)
		}
		if err := <-errs; err != nil {
			t.Fatalf("Invoke = %v", err)
		}
		start := time.Now()
		got := <-two
		if !got.failed || !strings.Contains(string(got.env.Payload), "run "+id+" ended") ||
			!strings.Contains(string(got.env.Payload), "nothing you send now reaches the client") {
			t.Fatalf("queued agent.message: %s (refused %v)", got.env.Payload, got.failed)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("the agent heard after %s, not when the run ended", waited)
		}
	})
}
