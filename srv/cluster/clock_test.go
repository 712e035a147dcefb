package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// Instances whose wall clocks differ by minutes (a host whose NTP is off)
// still agree on every time they share: a question's deadline, a note's
// end, the age of a capability's claim. Each is written by one instance
// and read by the others.

// skewed is a machine's clock off by d.
func skewed(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}

// openClocked opens the cluster of an instance whose machine's clock is
// off by d, with no hub: what its pushes and channels read and write.
func openClocked(t *testing.T, url, name string, d time.Duration) *Cluster {
	t.Helper()
	c, err := Open(context.Background(), Options{URL: url, Tokens: []string{tok}, Instance: name, Heartbeat: 50 * time.Millisecond, Clock: skewed(d)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// startClocked starts an instance whose machine's clock is off by d; its
// hub takes the time from the cluster, as agentassistant-srv's does.
func startClocked(t *testing.T, url, name string, d time.Duration) *instance {
	t.Helper()
	c := openClocked(t, url, name, d)
	h := hub.New(hub.Options{OrphanNotice: time.Hour, Shared: c, Instance: name, Now: c.Now})
	if err := c.Start(h, func() int { n, _ := h.Status(tok); return n }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close) // before the cluster's
	select {
	case <-c.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("cluster never ready")
	}
	return &instance{hub: h, c: c}
}

// TestClockAheadTimesNothingOutEarly: an instance whose clock is ten
// minutes ahead hears a question asked elsewhere with a minute to go; it
// does not time it out at once (for the whole cluster), and the answer
// given reaches the agent.
func TestClockAheadTimesNothingOutEarly(t *testing.T) {
	ns := natstest.Start(t)
	a, b := startClocked(t, ns.URL(), "a", 0), startClocked(t, ns.URL(), "b", 10*time.Minute)
	onB := newClient("pb")
	b.hub.Join(tok, onB, nil, hub.Resume{})
	done := ask(context.Background(), a, question("q", "Which database?"))
	onB.expect(t, wire.CmdAskQuestion)
	if err := a.hub.Answer(context.Background(), tok, wire.AskQuestion, "q", reply("pa", "PostgreSQL")); err != nil {
		t.Fatalf("answer on A: %v", err)
	}
	if r := wait(t, done); r.err != nil || text(r.rep) != "PostgreSQL" {
		t.Fatalf("Ask = %+v, %v; want the answer", r.rep, r.err)
	}
	onB.expect(t, wire.CmdAskQuestionReplyNotification)
}

// TestClockBehindTimesOutOnTime: the instance that asked is gone; the
// one left, its clock ten minutes behind, times the question out at its
// deadline, not ten minutes after it.
func TestClockBehindTimesOutOnTime(t *testing.T) {
	ns := natstest.Start(t)
	a, b := startClocked(t, ns.URL(), "a", 0), startClocked(t, ns.URL(), "b", -10*time.Minute)
	onB := newClient("pb")
	b.hub.Join(tok, onB, nil, hub.Resume{})
	req := question("q", "Quick?")
	req.Timeout = 2 * time.Second // records keep whole seconds
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := ask(ctx, a, req)
	onB.expect(t, wire.CmdAskQuestion)
	a.hub.Close() // its deadline timer with it
	_ = a.c.Close()
	if r := wait(t, done); r.err == nil {
		t.Fatalf("Ask through a closed instance = %+v", r.rep)
	}
	if n := onB.expect(t, wire.CmdRequestCancelled); n.GetRequestCancelledNotification().GetReason() != "timeout" {
		t.Fatalf("B told %v, want a timeout", n)
	}
}

// TestClockAheadTakesNoFreshClaim: a capability claimed on one instance
// a moment ago is not taken over as stale by an instance whose clock is
// ten minutes ahead: a one-tap answer is used once.
func TestClockAheadTakesNoFreshClaim(t *testing.T) {
	ns := natstest.Start(t)
	a, b := openClocked(t, ns.URL(), "a", 0), openClocked(t, ns.URL(), "b", 10*time.Minute)
	pa, pb := openPushOf(t, &instance{c: a}), openPushOf(t, &instance{c: b})
	if ok, err := pa.Claim(context.Background(), "nonce-1", time.Time{}); !ok || err != nil {
		t.Fatalf("first claim: %v, %v", ok, err)
	}
	if ok, err := pb.Claim(context.Background(), "nonce-1", time.Time{}); ok || err != nil {
		t.Fatalf("a second claim at once, on the instance ahead: %v, %v; want refused", ok, err)
	}
}

// TestClockAheadKeepsNotes: a channel's note kept until a minute from now
// is found by the instance ten minutes ahead (a reply there is taken,
// not told "Not taken"), and one past its time is not found by the
// instance ten minutes behind.
func TestClockAheadKeepsNotes(t *testing.T) {
	ns := natstest.Start(t)
	a := openClocked(t, ns.URL(), "a", 0)
	ahead := openClocked(t, ns.URL(), "ahead", 10*time.Minute)
	behind := openClocked(t, ns.URL(), "behind", -10*time.Minute)
	open := func(c *Cluster) *Channels {
		ch, err := c.OpenChannels(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	ca, cAhead, cBehind := open(a), open(ahead), open(behind)
	ctx := context.Background()
	if err := ca.Put(ctx, "live", []byte("q1"), a.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := ca.Put(ctx, "past", []byte("q2"), a.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := cAhead.Get(ctx, "live"); err != nil || !ok || string(v) != "q1" {
		t.Errorf("the note, read ten minutes ahead: %q, %v, %v; want it", v, ok, err)
	}
	if v, ok, err := cBehind.Get(ctx, "past"); err != nil || ok {
		t.Errorf("the note past its time, read ten minutes behind: %q, %v, %v; want none", v, ok, err)
	}
	if made, err := cAhead.Create(ctx, "live", []byte("other"), ahead.Now().Add(time.Minute)); err != nil || made {
		t.Errorf("a note made over the live one, ten minutes ahead: %v, %v; want refused", made, err)
	}
}
