package channel

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// pipeSlackStore is pipeSlack whose hub saves its answers in a store
// that can be told to refuse them (a cluster's NATS without a quorum,
// a full disk).
func pipeSlackStore(t *testing.T) (*slacktest.API, *Slack, *hub.Hub, *memShared) {
	t.Helper()
	shared := newMemShared(t, tokA)
	h := hub.New(hub.Options{Shared: shared})
	shared.hub.Store(h)
	api, sl, _ := pipeSlackOn(t, h, nil)
	return api, sl, h, shared
}

// acked reports whether what was sent on ch is acknowledged by now: t
// fails when it was acknowledged with an error.
func acked(t *testing.T, ch <-chan error) bool {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("sent: %v", err)
		}
		return true
	default:
		return false
	}
}

// ephemeralsTo are the texts shown so far to user alone.
func ephemeralsTo(api *slacktest.API, user string) []string {
	var out []string
	for _, c := range callsOn(api, "chat.postEphemeral") {
		if c["user"] == user {
			out = append(out, c["text"])
		}
	}
	return out
}

// callsOn are the forms of the calls of method so far.
func callsOn(api *slacktest.API, method string) []map[string]string {
	var out []map[string]string
	_ = api.WaitFor(context.Background(), func(cs []slacktest.Call) bool {
		for _, c := range cs {
			if c.Method == method {
				out = append(out, c.Form)
			}
		}
		return true
	})
	return out
}

// TestSlackReplyAcknowledgedOnlyOnceSaved: a thread reply whose answer
// the store cannot save for a while is not acknowledged, not even after
// Slack's 3 s, so that a server killed meanwhile has it sent again;
// Slack's own re-sending of it (retry_attempt 1) is not acknowledged
// either while the first is not saved, and once the store takes the
// answer both are, the answer taken once and no one told "Not taken".
func TestSlackReplyAcknowledgedOnlyOnceSaved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const dm = "D42"
		api, _, h, shared := pipeSlackStore(t)
		q := askOn(t, h, "q-1")
		ts := api.Call(t, "chat.postMessage", 1)["_ts"]
		synctest.Wait()

		shared.fail.Store(true)
		reply := slacktest.ThreadReply("U42", dm, ts, "Ship it.")
		first := make(chan error, 1)
		go func() { first <- api.Send(t.Context(), "events_api", reply) }()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if shared.refused.Load() == 0 {
			t.Fatal("the answer was never tried")
		}
		if acked(t, first) {
			t.Fatal("the reply was acknowledged before its answer was saved")
		}
		again := make(chan error, 1)
		go func() { again <- api.Retry(t.Context(), "events_api", reply) }()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if acked(t, first) || acked(t, again) {
			t.Fatal("the reply was acknowledged before its answer was saved")
		}

		shared.fail.Store(false)
		if got := textOf(answer(t, q)); got != "Ship it." {
			t.Fatalf("the agent got %q", got)
		}
		synctest.Wait()
		if !acked(t, first) {
			t.Error("the reply was not acknowledged once saved")
		}
		if !acked(t, again) {
			t.Error("the reply sent again was not acknowledged once the first was saved")
		}
		if told := notTakenIn(api); len(told) != 0 {
			t.Errorf("the person was told %q", told)
		}
	})
}

// TestSlackHeldReplyAcknowledgedOnceHandled: a thread reply held for
// its question's note (on its way to the store) is acknowledged once it
// is taken, not when it is set aside; Slack's re-sending of it meanwhile
// waits for it, while the replies after it are taken and acknowledged.
func TestSlackHeldReplyAcknowledgedOnceHandled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const dm = "D42"
		notes := newHidingNotes()
		api, sl, h, m := pipeSlack(t, notes)
		q1 := askOn(t, h, "q-1")
		ts1 := api.Call(t, "chat.postMessage", 1)["_ts"]
		q2 := askOn(t, h, "q-2")
		ts2 := api.Call(t, "chat.postMessage", 2)["_ts"]
		synctest.Wait()
		notes.hide(sl.noteKey(slackKey{dm, ts1}))
		notes.hide(sl.tagKey(m.seqOf(store.Room(tokA), "q-1")))

		reply := slacktest.ThreadReply("U42", dm, ts1, "Ship it.")
		first := make(chan error, 1)
		go func() { first <- api.Send(t.Context(), "events_api", reply) }()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		again := make(chan error, 1)
		go func() { again <- api.Retry(t.Context(), "events_api", reply) }()
		api.Envelope(t, "events_api", slacktest.ThreadReply("U42", dm, ts2, "Roll back."))
		if got := textOf(answer(t, q2)); got != "Roll back." {
			t.Fatalf("the reply after the held one: the agent got %q", got)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if acked(t, first) || acked(t, again) {
			t.Fatal("the held reply was acknowledged before it was taken")
		}

		notes.show(sl.noteKey(slackKey{dm, ts1}))
		notes.show(sl.tagKey(m.seqOf(store.Room(tokA), "q-1")))
		if got := textOf(answer(t, q1)); got != "Ship it." {
			t.Fatalf("the held reply: the agent got %q", got)
		}
		synctest.Wait()
		if !acked(t, first) || !acked(t, again) {
			t.Error("the held reply was not acknowledged once taken")
		}
		if told := notTakenIn(api); len(told) != 0 {
			t.Errorf("the person was told %q", told)
		}
	})
}

// TestSlackPressUnsavedToldSo: a press must be acknowledged within 3 s
// (Slack shows the person an error otherwise), saved or not: one whose
// answer the store cannot save within ackWithin is acknowledged and the
// presser told, to them alone, that it is not saved yet and to press
// again if the question still shows as waiting; it is still tried, and
// once saved the message says the question is answered. A press saved
// at once is told nothing.
func TestSlackPressUnsavedToldSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const dm = "D42"
		api, _, h, shared := pipeSlackStore(t)
		q1 := askOn(t, h, "q-1")
		ts1 := api.Call(t, "chat.postMessage", 1)["_ts"]
		q2 := askOn(t, h, "q-2")
		ts2 := api.Call(t, "chat.postMessage", 2)["_ts"]
		synctest.Wait()

		api.Envelope(t, "interactive", slacktest.Press("U42", dm, ts1, "a:0"))
		answer(t, q1)
		time.Sleep(defaultAckWithin + time.Second)
		synctest.Wait()
		if told := ephemeralsTo(api, "U42"); len(told) != 0 {
			t.Fatalf("a press saved at once was told %q", told)
		}

		shared.fail.Store(true)
		pressed := make(chan error, 1)
		go func() { pressed <- api.Send(t.Context(), "interactive", slacktest.Press("U42", dm, ts2, "a:0")) }()
		time.Sleep(defaultAckWithin)
		synctest.Wait()
		if !acked(t, pressed) {
			t.Fatal("the press was not acknowledged within ackWithin")
		}
		told := ephemeralsTo(api, "U42")
		if len(told) != 1 || !strings.Contains(told[0], "not saved yet") || !strings.Contains(told[0], "press again") {
			t.Fatalf("the presser was told %q", told)
		}
		select {
		case rep := <-q2:
			t.Fatalf("answered while the store refuses it: %+v", rep)
		default:
		}

		shared.fail.Store(false)
		answer(t, q2)
		synctest.Wait()
		updated := false
		for _, c := range callsOn(api, "chat.update") {
			updated = updated || c["ts"] == ts2
		}
		if !updated {
			t.Error("the message of the question answered at last was not updated")
		}
		if told := ephemeralsTo(api, "U42"); len(told) != 1 {
			t.Errorf("the presser was told %q", told)
		}
	})
}
