package hub

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestSharedAnswerBeforeItsQuestionIsHeard: a question asked through
// instance A reaches a person through a door B serves (a mail, a chat,
// a one-tap link) before B's watch has brought its record; the person
// answers at once, through B. B waits to hear the question and takes
// the answer, rather than tell them it is no longer pending.
func TestSharedAnswerBeforeItsQuestionIsHeard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBus()
		nodes := instances(t, b, Options{OrphanNotice: time.Hour})
		a, bn := nodes[0], nodes[1]
		req := Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "Which colour?", Timeout: time.Hour}
		got := make(chan *Reply, 1)
		go func() { rep, _ := a.h.Ask(context.Background(), "tok", req); got <- rep }()
		synctest.Wait()
		b.deliver(a) // B has not heard it yet
		answered := make(chan error, 1)
		go func() {
			answered <- bn.h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("Blue."))
		}()
		synctest.Wait()
		b.deliver(bn)
		if err := <-answered; err != nil {
			t.Fatalf("B's answer: %v", err)
		}
		b.deliver(a, bn)
		if rep := <-got; rep == nil || rep.Contents[0].GetText().GetText() != "Blue." {
			t.Fatalf("the agent got %+v", rep)
		}
	})
}

// TestSharedAnswerNeverHeard: B does not wait for a question there is
// no record of, nor longer than catchUp for one it does not hear.
func TestSharedAnswerNeverHeard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBus()
		nodes := instances(t, b, Options{OrphanNotice: time.Hour})
		a, bn := nodes[0], nodes[1]
		start := time.Now()
		if err := bn.h.Answer(context.Background(), "tok", wire.AskQuestion, "none", textReply("Blue.")); !errors.Is(err, ErrNotPending) || time.Since(start) != 0 {
			t.Fatalf("an answer to no question: %v after %v", err, time.Since(start))
		}
		req := Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "Which colour?", Timeout: time.Hour}
		go func() { _, _ = a.h.Ask(context.Background(), "tok", req) }()
		synctest.Wait()
		b.deliver(a)
		start = time.Now()
		if err := bn.h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("Blue.")); !errors.Is(err, ErrNotPending) || time.Since(start) != catchUp {
			t.Fatalf("an answer to a question never heard: %v after %v", err, time.Since(start))
		}
	})
}
