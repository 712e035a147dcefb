//go:build unix

package e2e

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
)

// TestClusterEmailPausedHolder: the instance that watches the mailbox
// (IMAP IDLE, its lease held) is paused (SIGSTOP) for longer than the
// lease, and the person's reply to a question's mail arrives just then.
// The other instance takes the lease, reads the reply and the agent has
// it. Then the paused one goes on (SIGCONT), its old IDLE telling it of
// that same mail: the reply is recorded once, no mail says "Not taken",
// and a question asked through the resumed instance is answered through
// the mailbox too, its reply arriving while the new holder waits in
// IDLE. The first question's follow-up ("No reply is needed any more")
// is mailed before the second question: each question's mail is found
// by what it asks, not by how many mails went before it.
func TestClusterEmailPausedHolder(t *testing.T) {
	sink := startMailSink(t)
	box := startMailbox(t)
	config := emailConfig(sink, box)
	ns := natstest.Start(t)
	srvs := map[string]*server{}
	for _, name := range []string{"a", "b"} {
		srvs[name] = startInstanceConfig(t, ns.URL(), name, config)
	}
	js := jetStreamAt(t, ns.URL())
	holder := leaseHolder(t, js, func(string) bool { return true })
	other := map[string]string{"a": "b", "b": "a"}[holder]

	ask := func(on, id string) (<-chan *pb.AskQuestionResponse, string) {
		out := make(chan *pb.AskQuestionResponse, 1)
		question := "Go on with " + id + "?"
		go func() {
			r, err := connectAsk(context.Background(), srvs[on], id, question)
			if err != nil {
				t.Errorf("ask %s: %v", id, err)
			}
			out <- r
		}()
		msgID := messageID(sink.question(t, question))
		waitNoted(t, js, id)
		return out, msgID
	}
	answered := func(id string, done <-chan *pb.AskQuestionResponse, want string) {
		t.Helper()
		select {
		case r := <-done:
			if got := r.GetContents(); len(got) != 1 || got[0].GetText().GetText() != want {
				t.Fatalf("%s: the agent got %v, want %q", id, got, want)
			}
		case <-time.After(45 * time.Second):
			t.Fatalf("%s: the agent never got %q", id, want)
		}
	}

	q1, m1 := ask(other, "em-1")
	paused := srvs[holder].cmd.Process
	if err := paused.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = paused.Signal(syscall.SIGCONT) })
	stopped := time.Now()
	box.deliver(t, replyTo(1, m1, "first"))
	leaseHolder(t, js, func(h string) bool { return h == other })
	tookOver := time.Since(stopped)
	answered("em-1", q1, "first")

	if err := paused.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	q2, m2 := ask(holder, "em-2")
	// The new holder, which took the first reply, waits in IDLE.
	box.waitIdle(t, 1)
	if idle := box.deliver(t, replyTo(2, m2, "second")); !slices.ContainsFunc(idle, func(n int) bool { return n >= 1 }) {
		t.Fatalf("the second reply came while the sessions in IDLE had marked %v mails, want one that took the first", idle)
	}
	answered("em-2", q2, "second")

	for _, m := range sink.said("Not taken") {
		t.Errorf("the person was mailed %q", m)
	}
	t.Logf("replies 2, answered 2; lease taken over %v after the pause", tookOver.Round(100*time.Millisecond))
}
