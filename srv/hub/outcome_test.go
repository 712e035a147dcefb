package hub

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestOutcomeAfterALongStop: a server stopped longer than its outcomes
// are kept still tells a channel's follow-up how a request was settled,
// and the way its answer came, from its records on disk, rather than
// "not known".
func TestOutcomeAfterALongStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, restart := restartable(t)
		ctx, cancel := context.WithCancel(context.Background())
		_, withdrawn := ask(h, "tok", "build/7", time.Minute, ctx)
		_, timedOut := ask(h, "tok", "q-2", time.Second, context.Background())
		_, answered := ask(h, "tok", "q-3", time.Minute, context.Background())
		synctest.Wait()
		if err := h.Cancel(context.Background(), "tok", "build/7"); err != nil {
			t.Fatal(err)
		}
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "q-3", Reply{ClientID: "pc", Nickname: "Ana", Door: "email"}); err != nil {
			t.Fatal(err)
		}
		<-withdrawn
		<-timedOut
		<-answered
		cancel()
		h.Close()
		time.Sleep(24 * time.Hour) // down for a day: past every outcome's keeping
		h2, _ := restart()
		restored(t, h2)
		for id, want := range map[string]EventKind{"build/7": Withdrawn, "q-2": TimedOut, "q-3": Answered} {
			o, ok := h2.Outcome("tok", id)
			if !ok || o.Kind != want {
				t.Errorf("%s: outcome %v known %v, want %v", id, o.Kind, ok, want)
			}
			if want == Answered && (o.Reply == nil || o.Reply.Nickname != "Ana" || o.Reply.Door != "email") {
				t.Errorf("%s: reply %+v, want Ana's by e-mail", id, o.Reply)
			}
		}
		if _, ok := h2.Outcome("tok", "build"); ok {
			t.Error("a prefix of an ID was taken for it")
		}
		if _, ok := h2.Outcome("other", "q-3"); ok {
			t.Error("another token's request was told")
		}
		if h2.Forgotten("tok", "q-3") || !h2.Forgotten("tok", "never-asked") {
			t.Error("Forgotten does not tell a record on disk from none")
		}
	})
}
