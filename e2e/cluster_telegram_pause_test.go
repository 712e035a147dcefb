//go:build unix

package e2e

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// TestClusterTelegramPausedHolder: the instance that polls the bot is
// paused (SIGSTOP) with its long poll open, and a person replies at once:
// the reply reaches the paused process, which neither handles nor
// confirms it. Once its lease lapses the other instance polls, reads the
// reply again and the agent has it; a question asked meanwhile is
// answered too. Then the paused one goes on (SIGCONT) with its old poll's
// answer in hand and its lease gone: it stops polling at its next
// renewal, handles what it held as the person's own (no "Not taken"),
// and a question asked through it is answered through the other. Every
// reply is answered once.
func TestClusterTelegramPausedHolder(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	ns := natstest.Start(t)
	config := telegramConfig(tg.URL)
	srvs := map[string]*server{}
	for _, name := range []string{"a", "b"} {
		srvs[name] = startInstanceConfig(t, ns.URL(), name, config)
	}
	js := jetStreamAt(t, ns.URL())
	holder := leaseHolder(t, js, func(string) bool { return true })
	other := map[string]string{"a": "b", "b": "a"}[holder]

	sent := 0
	ask := func(on, id string) (<-chan *pb.AskQuestionResponse, int) {
		out := make(chan *pb.AskQuestionResponse, 1)
		go func() {
			r, err := connectAsk(context.Background(), srvs[on], id, "Go on with "+id+"?")
			if err != nil {
				t.Errorf("ask %s: %v", id, err)
			}
			out <- r
		}()
		sent++
		msg, err := strconv.Atoi(tg.Call(t, "sendMessage", sent)["sent_message_id"])
		if err != nil {
			t.Fatal(err)
		}
		waitNoted(t, js, id)
		return out, msg
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
	q1, m1 := ask(other, "tg-1")
	// The holder's long poll is open (the next follows each answer at
	// once).
	paused := srvs[holder].cmd.Process
	if err := paused.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = paused.Signal(syscall.SIGCONT) })
	stopped := time.Now()
	tg.Push(telegramtest.Reply(chat, 501, m1, "first"))

	leaseHolder(t, js, func(h string) bool { return h == other })
	tookOver := time.Since(stopped)
	answered("tg-1", q1, "first")
	q2, m2 := ask(other, "tg-2")
	tg.Push(telegramtest.Reply(chat, 502, m2, "second"))
	answered("tg-2", q2, "second")

	conflicts := tg.Conflicts()
	if err := paused.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	q3, m3 := ask(holder, "tg-3")
	tg.Push(telegramtest.Reply(chat, 503, m3, "third"))
	answered("tg-3", q3, "third")

	// Each question's message edited once, as settled (the edit follows
	// the answer); no reply told it was not taken.
	edits := map[string]int{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = tg.WaitFor(ctx, func(cs []telegramtest.Call) bool {
		clear(edits)
		for _, c := range cs {
			if c.Method == "editMessageText" {
				edits[c.Form["message_id"]]++
			}
		}
		return len(edits) == 3
	})
	for _, said := range tg.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
	for _, m := range []int{m1, m2, m3} {
		if n := edits[strconv.Itoa(m)]; n != 1 {
			t.Errorf("message %d edited %d times, want once", m, n)
		}
	}
	t.Logf("replies 3, answered 3; lease taken over %v after the pause; getUpdates ended by another: %d before SIGCONT, %d after",
		tookOver.Round(100*time.Millisecond), conflicts, tg.Conflicts()-conflicts)
}
