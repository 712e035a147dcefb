package hub

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestSharedReattachByDigest: an agent's call asked through A is cut and
// resumed through B, which has only the request's ID, kind and digest
// (not its text). B re-attaches while the request is pending, becomes
// its holder, and its caller has the answer a device gives on C, with
// the request's choices to read it against; the project's next call is
// not handed it again. A digest of another request, or an ID never
// asked, re-attaches to nothing.
func TestSharedReattachByDigest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBus()
		nodes := instances(t, b, Options{OrphanNotice: time.Minute, OrphanGrace: time.Hour})
		a, bn, c := nodes[0], nodes[1], nodes[2]
		qs := []*pb.Question{{Question: "Which colour?", Options: []*pb.Option{{Label: "Blue"}, {Label: "Red"}}}}
		req := Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "Which colour?", Timeout: time.Hour, Questions: qs}
		sum := wire.Digest(req.Kind, req.ProjectDirectory, req.Text)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _, _ = a.h.Ask(ctx, "tok", req) }()
		synctest.Wait()
		b.deliver(a, bn, c)
		cancel() // the call is cut on A
		synctest.Wait()

		if _, _, err := bn.h.Reattach(context.Background(), "tok", wire.AskQuestion, "q", wire.Digest(wire.AskQuestion, "/p", "Which shape?")); !errors.Is(err, ErrDuplicate) {
			t.Errorf("another request's digest: %v, want ErrDuplicate", err)
		}
		if _, _, err := bn.h.Reattach(context.Background(), "tok", wire.AskQuestion, "never", sum); !errors.Is(err, ErrUnknown) {
			t.Errorf("an ID never asked: %v, want ErrUnknown", err)
		}
		type got struct {
			rep *Reply
			qs  []*pb.Question
			err error
		}
		done := make(chan got, 1)
		go func() {
			rep, qs, err := bn.h.Reattach(context.Background(), "tok", wire.AskQuestion, "q", sum)
			done <- got{rep, qs, err}
		}()
		synctest.Wait()
		b.deliver(a, bn, c)
		if h := b.last().Holder; h != "b" {
			t.Fatalf("the record's holder is %q, want b", h)
		}
		if err := c.h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("Blue")); err != nil {
			t.Fatal(err)
		}
		b.deliver(a, bn, c)
		synctest.Wait()
		r := <-done
		if r.err != nil || r.rep == nil || r.rep.Contents[0].GetText().GetText() != "Blue" {
			t.Fatalf("B's caller: %+v %v", r.rep, r.err)
		}
		if len(r.qs) != 1 || r.qs[0].GetQuestion() != "Which colour?" {
			t.Errorf("the request's choices: %v", r.qs)
		}
		if n := b.last().ClosedNote; n != "" {
			t.Errorf("the answer's note is %q: B's caller had it", n)
		}
		b.deliver(a, bn, c)
		synctest.Wait()
		noneGivesIt(t, nodes)
	})
}

// TestSharedReattachKeptOnce: the answer comes while the call is cut (no
// caller anywhere): it is kept for the project's next call. The call
// resumed through B re-attaches by digest and is handed it; a second
// resume (the client cut again) gets it again, as a caller re-attaching
// by ID does; the project's next call is not. Had the project's next
// call taken it first, the resumed call would hear so (ErrHandedOver).
func TestSharedReattachKeptOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBus()
		nodes := instances(t, b, Options{OrphanNotice: time.Minute, OrphanGrace: time.Hour})
		a, bn, c := nodes[0], nodes[1], nodes[2]
		ask := func(id string) [32]byte {
			req := Request{Kind: wire.TaskFinish, ID: id, ProjectDirectory: "/p", Text: "Done " + id, Timeout: time.Hour}
			ctx, cancel := context.WithCancel(context.Background())
			go func() { _, _ = a.h.Ask(ctx, "tok", req) }()
			synctest.Wait()
			b.deliver(a, bn, c)
			cancel()
			synctest.Wait()
			if err := c.h.Answer(context.Background(), "tok", wire.TaskFinish, id, textReply("Thanks "+id)); err != nil {
				t.Fatal(err)
			}
			b.deliver(a, bn, c)
			synctest.Wait()
			b.deliver(a, bn, c)
			return wire.Digest(req.Kind, req.ProjectDirectory, req.Text)
		}
		sum := ask("r1")
		for i := range 2 {
			rep, _, err := bn.h.Reattach(context.Background(), "tok", wire.TaskFinish, "r1", sum)
			if err != nil || rep.Contents[0].GetText().GetText() != "Thanks r1" {
				t.Fatalf("resume %d: %v %v", i, rep, err)
			}
			b.deliver(a, bn, c)
			synctest.Wait()
		}
		noneGivesIt(t, nodes)

		sum = ask("r2")
		if got := c.h.TakeMissed("tok", "/p", nil, 0); len(got) != 1 {
			t.Fatalf("the project's next call: %+v", got)
		}
		b.deliver(a, bn, c)
		if _, _, err := bn.h.Reattach(context.Background(), "tok", wire.TaskFinish, "r2", sum); !errors.Is(err, ErrHandedOver) {
			t.Errorf("a resume after the project's next call took it: %v, want ErrHandedOver", err)
		}
	})
}
