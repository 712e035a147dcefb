package hub

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
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

// TestSharedCancelBeforeItsQuestionIsHeard: an agent asks through A and
// withdraws the question at once through B (its call moved there, or
// another of its tools cancels), before B's watch has brought the
// record. B waits to hear it and withdraws it, rather than say it is no
// longer pending while every device keeps showing it.
func TestSharedCancelBeforeItsQuestionIsHeard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBus()
		nodes := instances(t, b, Options{OrphanNotice: time.Hour})
		a, bn := nodes[0], nodes[1]
		req := Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "Which colour?", Timeout: time.Hour}
		asked := make(chan error, 1)
		go func() { _, err := a.h.Ask(context.Background(), "tok", req); asked <- err }()
		synctest.Wait()
		b.deliver(a) // B has not heard it yet
		cancelled := make(chan error, 1)
		go func() { cancelled <- bn.h.Cancel(context.Background(), "tok", "q") }()
		synctest.Wait()
		b.deliver(bn)
		if err := <-cancelled; err != nil {
			t.Fatalf("B's cancel: %v", err)
		}
		b.deliver(a, bn)
		if err := <-asked; !errors.Is(err, ErrWithdrawn) {
			t.Fatalf("the agent got %v", err)
		}
		if rec := b.last(); rec.Status != store.Cancelled {
			t.Fatalf("the record is %s", rec.Status)
		}
	})
}

// TestSharedCancelNeverHeard: a cancel of a request with no record, or
// one not heard within catchUp, is refused as not pending, at once or
// after catchUp.
func TestSharedCancelNeverHeard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBus()
		nodes := instances(t, b, Options{OrphanNotice: time.Hour})
		a, bn := nodes[0], nodes[1]
		start := time.Now()
		if err := bn.h.Cancel(context.Background(), "tok", "none"); !errors.Is(err, ErrNotPending) || time.Since(start) != 0 {
			t.Fatalf("a cancel of no request: %v after %v", err, time.Since(start))
		}
		req := Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "Which colour?", Timeout: time.Hour}
		go func() { _, _ = a.h.Ask(context.Background(), "tok", req) }()
		synctest.Wait()
		b.deliver(a)
		start = time.Now()
		if err := bn.h.Cancel(context.Background(), "tok", "q"); !errors.Is(err, ErrNotPending) || time.Since(start) != catchUp {
			t.Fatalf("a cancel of a request never heard: %v after %v", err, time.Since(start))
		}
		// A caller gone (its connection closed) is not waited for.
		gone, cancel := context.WithCancel(context.Background())
		cancel()
		start = time.Now()
		if err := bn.h.Cancel(gone, "tok", "q2"); err == nil || time.Since(start) != 0 {
			t.Fatalf("a cancel whose caller left: %v after %v", err, time.Since(start))
		}
	})
}
