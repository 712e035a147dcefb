//go:build unix

package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/slacktest"
)

// The Slack app of the cluster tests, and the person it asks.
const (
	slBot, slApp = "xoxb-e2e-cluster-bot-token", "xapp-1-A1-e2e-cluster-app-token"
	slUser       = "U42"
)

func slackConfig(api string) string {
	return fmt.Sprintf("[channels.slack]\nbot_token = %q\napp_token = %q\nchannel = %q\nusers = [%q]\napi_url = %q\n", slBot, slApp, slUser, slUser, api)
}

// slackSaid is the thread messages of the bot that say what.
func slackSaid(calls []slacktest.Call, what string) []string {
	var out []string
	for _, c := range calls {
		if c.Method == "chat.postMessage" && strings.Contains(c.Form["text"], what) {
			out = append(out, c.Form["text"])
		}
	}
	return out
}

// TestClusterSlackPausedHolder: the instance holding Slack's lease (its
// Socket Mode connection open) is paused (SIGSTOP) for longer than the
// lease, and a person replies in a question's thread just then: the
// envelope reaches the paused process, which neither handles nor
// acknowledges it. The other instance takes the lease, opens its own
// connection, and Slack delivers the unacknowledged reply again there:
// the agent has it. Then the paused one goes on (SIGCONT) with the old
// envelope in its socket and its lease gone: the person is not told
// "Not taken" for their own answer, the message is updated once, and a
// question asked through the resumed instance is answered through the
// other.
func TestClusterSlackPausedHolder(t *testing.T) {
	sl := slacktest.Start(t, slBot, slApp)
	ns := natstest.Start(t)
	srvs := map[string]*server{}
	for _, name := range []string{"a", "b"} {
		srvs[name] = startInstanceConfig(t, ns.URL(), name, slackConfig(sl.APIURL()))
	}
	js := jetStreamAt(t, ns.URL())
	holder := leaseHolder(t, js, func(string) bool { return true })
	other := map[string]string{"a": "b", "b": "a"}[holder]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sl.Connected(ctx); err != nil {
		t.Fatal(err)
	}

	posted := 0
	ask := func(on, id string) (<-chan *pb.AskQuestionResponse, string) {
		out := make(chan *pb.AskQuestionResponse, 1)
		go func() {
			r, err := connectAsk(context.Background(), srvs[on], id, "Go on with "+id+"?")
			if err != nil {
				t.Errorf("ask %s: %v", id, err)
			}
			out <- r
		}()
		posted++
		ts := sl.Call(t, "chat.postMessage", posted)["_ts"]
		waitNoted(t, js, id)
		return out, ts
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

	q1, ts1 := ask(other, "sl-1")
	paused := srvs[holder].cmd.Process
	if err := paused.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = paused.Signal(syscall.SIGCONT) })
	stopped := time.Now()
	reply := slacktest.ThreadReply(slUser, slacktest.DM(slUser), ts1, "first")
	// To the paused holder's connection: never acknowledged while it
	// is paused.
	firstAcked := make(chan error, 1)
	go func() { firstAcked <- sl.Send(ctx, "events_api", reply) }()

	leaseHolder(t, js, func(h string) bool { return h == other })
	tookOver := time.Since(stopped)
	if err := sl.Dialled(ctx, 2); err != nil {
		t.Fatal(err)
	}
	// Slack delivers an envelope not acknowledged again, to a
	// connection that is alive.
	sl.Redelivered(t, "events_api", reply)
	answered("sl-1", q1, "first")

	if err := paused.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	q2, ts2 := ask(holder, "sl-2")
	sl.Envelope(t, "events_api", slacktest.ThreadReply(slUser, slacktest.DM(slUser), ts2, "second"))
	answered("sl-2", q2, "second")

	// Each question's message updated once, as settled.
	updates := map[string]int{}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	_ = sl.WaitFor(wctx, func(cs []slacktest.Call) bool {
		clear(updates)
		for _, c := range cs {
			if c.Method == "chat.update" {
				updates[c.Form["ts"]]++
			}
		}
		return len(updates) == 2
	})
	for _, ts := range []string{ts1, ts2} {
		if n := updates[ts]; n != 1 {
			t.Errorf("message %s updated %d times, want once", ts, n)
		}
	}
	var acked string
	select {
	case err := <-firstAcked:
		acked = fmt.Sprintf("acknowledged by the resumed instance (%v)", err)
	default:
		acked = "left unacknowledged by the resumed instance"
	}
	_ = sl.WaitFor(wctx, func(cs []slacktest.Call) bool {
		for _, said := range slackSaid(cs, "Not taken") {
			t.Errorf("the person was told %q", said)
		}
		return true
	})
	t.Logf("replies 2, answered 2; lease taken over %v after the pause; the first envelope %s",
		tookOver.Round(100*time.Millisecond), acked)
}
