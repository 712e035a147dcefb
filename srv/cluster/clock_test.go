package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
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

// TestClockSkewRound: three instances, one on time, one ten minutes
// ahead, one seven behind; agents ask on each at once (a minute to
// answer) and every question is answered through another instance. None
// times out (lost), no device is told two outcomes of one question
// (twice), and none is left showing a question (left).
func TestClockSkewRound(t *testing.T) {
	const perInstance = 30
	ns := natstest.Start(t)
	ins := []*instance{
		startClocked(t, ns.URL(), "on-time", 0),
		startClocked(t, ns.URL(), "ahead", 10*time.Minute),
		startClocked(t, ns.URL(), "behind", -7*time.Minute),
	}
	clients := make([]*client, len(ins))
	for i, in := range ins {
		clients[i] = newClient(fmt.Sprint("p", i))
		in.hub.Join(tok, clients[i], nil, hub.Resume{})
	}
	type asked struct {
		id   string
		by   int // the instance answering
		done chan result
	}
	var all []asked
	for i, in := range ins {
		for j := range perInstance {
			id := fmt.Sprintf("q-%d-%d", i, j)
			all = append(all, asked{id: id, by: (i + 1 + j%2) % len(ins), done: ask(context.Background(), in, question(id, "Skewed?"))})
		}
	}
	// Each answered once every device shows it: answered through the
	// next instance or the one after.
	shown := make([]map[string]int, len(ins))
	settled := make([]map[string]int, len(ins))
	for i := range ins {
		shown[i], settled[i] = map[string]int{}, map[string]int{}
	}
	read := func(i int, m *pb.WebsocketMessage) {
		switch m.Cmd {
		case wire.CmdAskQuestion:
			shown[i][m.GetAskQuestionRequest().GetID()]++
		case wire.CmdAskQuestionReplyNotification:
			settled[i][m.GetAskQuestionResponse().GetID()]++
		case wire.CmdRequestCancelled:
			settled[i][m.GetRequestCancelledNotification().GetRequestId()]++
		}
	}
	until := func(what string, done func() bool) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for !done() {
			select {
			case m := <-clients[0].frames:
				read(0, m)
			case m := <-clients[1].frames:
				read(1, m)
			case m := <-clients[2].frames:
				read(2, m)
			case <-deadline:
				t.Fatalf("%s: never", what)
			}
		}
	}
	until("every question shown on every device", func() bool {
		for i := range ins {
			if len(shown[i]) < len(all) {
				return false
			}
		}
		return true
	})
	for _, q := range all {
		if err := ins[q.by].hub.Answer(context.Background(), tok, wire.AskQuestion, q.id, reply(clients[q.by].id, "yes "+q.id)); err != nil {
			t.Errorf("answer %s on %s: %v", q.id, ins[q.by].c.Instance(), err)
		}
	}
	lost := 0
	for _, q := range all {
		if r := wait(t, q.done); r.err != nil || text(r.rep) != "yes "+q.id {
			lost++
			t.Errorf("%s: Ask = %v, %v", q.id, r.rep, r.err)
		}
	}
	// The devices not answering are told; a last question, asked and
	// answered after all, marks the end of what they are told.
	mark := ask(context.Background(), ins[0], question("mark", "End?"))
	until("the mark shown", func() bool { return shown[0]["mark"]+shown[1]["mark"]+shown[2]["mark"] == 3 })
	if err := ins[1].hub.Answer(context.Background(), tok, wire.AskQuestion, "mark", reply("p1", "end")); err != nil {
		t.Fatal(err)
	}
	wait(t, mark)
	until("every outcome told", func() bool {
		for i := range ins {
			if i != 1 && settled[i]["mark"] == 0 {
				return false
			}
		}
		return true
	})
	twice, left := 0, 0
	for i := range ins {
		for _, q := range all {
			want := 1
			if q.by == i {
				want = 0 // the device answering is not told its own answer
			}
			switch n := settled[i][q.id]; {
			case n > want:
				twice++
			case n < want:
				left++
				t.Errorf("device %d: %s told %d times, want %d", i, q.id, n, want)
			}
			if shown[i][q.id] != 1 {
				t.Errorf("device %d shown %s %d times", i, q.id, shown[i][q.id])
			}
		}
		if ids := ins[i].hub.PendingIDs(); len(ids) != 0 {
			left += len(ids)
			t.Errorf("%s still pending: %v", ins[i].c.Instance(), ids)
		}
	}
	t.Logf("%d questions on 3 instances (clocks 0, +10 min, -7 min): lost %d, twice %d, left showing %d", len(all), lost, twice, left)
	if lost+twice+left != 0 {
		t.Fatalf("lost %d, twice %d, left %d", lost, twice, left)
	}
}
