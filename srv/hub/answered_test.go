package hub

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestAnsweredBeforeHeard: in a cluster, an instance asked whose answer
// a request has (a chat's reply taken twice, once on each side of a
// lease's move) is told the answer another instance wrote a moment ago,
// before it has heard it: the record is read.
func TestAnsweredBeforeHeard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBus()
		nodes := instances(t, b, Options{})
		a, bn := nodes[0], nodes[1]
		req := Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "Which colour?", Timeout: time.Hour}
		go func() { _, _ = a.h.Ask(context.Background(), "tok", req) }()
		synctest.Wait()
		b.deliver(nodes...)
		synctest.Wait()
		if err := a.h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("Blue.")); err != nil {
			t.Fatal(err)
		}
		// B has not heard the answer yet.
		rep, ok := bn.h.Answered("tok", "q")
		if !ok || rep.Contents[0].GetText().GetText() != "Blue." {
			t.Fatalf("B says the answer is %+v (%v)", rep, ok)
		}
		if _, ok := bn.h.Answered("tok", "unknown"); ok {
			t.Error("an unknown request has an answer")
		}
		b.deliver(nodes...)
		synctest.Wait()
	})
}
