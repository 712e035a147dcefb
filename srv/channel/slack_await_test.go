package channel

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/pipenet"
	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// pipeSlack is a Slack channel of a Manager given notes (a cluster's)
// and Slack's double on an in-memory network, for a synctest bubble.
func pipeSlack(t *testing.T, notes Notes) (*slacktest.API, *Slack, *hub.Hub, *Manager) {
	t.Helper()
	h := hub.New(hub.Options{})
	api, sl, m := pipeSlackOn(t, h, notes)
	return api, sl, h, m
}

// pipeSlackOn is pipeSlack over h, which closes when the test ends.
func pipeSlackOn(t *testing.T, h *hub.Hub, notes Notes) (*slacktest.API, *Slack, *Manager) {
	t.Helper()
	const botToken, appToken = "xoxb-3-secret-bot-token", "xapp-3-A1-secret-app-token"
	ln := pipenet.New()
	api := slacktest.NewOn(botToken, appToken, ln)
	t.Cleanup(api.Close)
	tr := &http.Transport{DialContext: ln.Dial}
	t.Cleanup(tr.CloseIdleConnections)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL(),
		transport: tr, dial: ln.Dial}
	t.Cleanup(h.Close)
	caps := answercap.New()
	t.Cleanup(caps.Follow(h, store.Room))
	m := New(Options{Hub: h, Caps: caps, Routes: map[string][]Channel{tokA: {sl}}, Notes: notes})
	t.Cleanup(m.Close)
	if err := api.Connected(t.Context()); err != nil {
		t.Fatal(err)
	}
	return api, sl, m
}

// notTakenIn are the "Not taken" messages posted so far, by thread.
func notTakenIn(api *slacktest.API) map[string][]string {
	out := map[string][]string{}
	for _, c := range callsOn(api, "chat.postMessage") {
		if strings.Contains(c["text"], "Not taken") {
			out[c["thread_ts"]] = append(out[c["thread_ts"]], c["text"])
		}
	}
	return out
}

// TestSlackReplyWaitsForItsNote: a reply in the thread of the bot's
// message whose note is not in the store yet (kept by the instance that
// posted it until NATS takes it) is held and taken once the note is
// there; a reply read after it answers meanwhile; no one is told "Not
// taken".
func TestSlackReplyWaitsForItsNote(t *testing.T) {
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
		notes.hide(sl.tagKey(m.seqOf(store.Room(tokA), "q-1"))) // held back with it

		// Acknowledged once taken (slack_ack_test.go).
		held := make(chan error, 1)
		go func() { held <- api.Send(t.Context(), "events_api", slacktest.ThreadReply("U42", dm, ts1, "Ship it.")) }()
		api.Envelope(t, "events_api", slacktest.ThreadReply("U42", dm, ts2, "Roll back."))
		if got := textOf(answer(t, q2)); got != "Roll back." {
			t.Fatalf("the reply after the held one: the agent got %q", got)
		}
		time.Sleep(10 * time.Second) // a while without the note
		synctest.Wait()
		if notes.misses() < 4 {
			t.Errorf("the note was looked up %d times in 10 s", notes.misses())
		}
		select {
		case rep := <-q1:
			t.Fatalf("answered without its note: %+v", rep)
		default:
		}

		notes.show(sl.noteKey(slackKey{dm, ts1}))
		notes.show(sl.tagKey(m.seqOf(store.Room(tokA), "q-1")))
		if got := textOf(answer(t, q1)); got != "Ship it." {
			t.Errorf("the held reply: the agent got %q", got)
		}
		if err := <-held; err != nil {
			t.Error(err)
		}
		if told := notTakenIn(api); len(told) != 0 {
			t.Errorf("the person was told %q", told)
		}
	})
}

// TestSlackReplyWithoutNoteToldAtLast: a reply in the thread of the
// bot's message whose note never comes is told "Not taken" in the
// thread once it was tried for retryFor, not before, and not passed
// over in silence; one in the thread of someone else's message is none
// of the bot's business, told nothing.
func TestSlackReplyWithoutNoteToldAtLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const dm = "D42"
		notes := newHidingNotes()
		api, sl, h, m := pipeSlack(t, notes)
		askOn(t, h, "q-1")
		ts := api.Call(t, "chat.postMessage", 1)["_ts"]
		synctest.Wait()
		notes.hide(sl.noteKey(slackKey{dm, ts}))
		notes.hide(sl.tagKey(m.seqOf(store.Room(tokA), "q-1")))

		held := make(chan error, 1)
		go func() { held <- api.Send(t.Context(), "events_api", slacktest.ThreadReply("U42", dm, ts, "Ship it.")) }()
		api.Envelope(t, "events_api", slacktest.ThreadReply("U42", dm, "1600000000.000001", "A thread of my own."))
		time.Sleep(retryFor - time.Second)
		synctest.Wait()
		if told := notTakenIn(api); len(told) != 0 {
			t.Fatalf("told before retryFor: %q", told)
		}
		time.Sleep(pollMaxRetry + 2*time.Second)
		synctest.Wait()
		told := notTakenIn(api)
		if len(told) != 1 || len(told[ts]) != 1 || !strings.Contains(told[ts][0], "asks no pending question") {
			t.Errorf("after retryFor the person was told %q", told)
		}
		if err := <-held; err != nil {
			t.Errorf("the reply told at last: %v", err)
		}
	})
}
