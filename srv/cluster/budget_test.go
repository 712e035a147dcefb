package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

const tok2 = "cluster-token-other-0123456789"

// budgeted starts an instance that keeps each room's history within
// budget bytes, logging to log.
func budgeted(t *testing.T, url, name string, budget int64, tokens []string, o hub.Options, log *syncBuffer) *instance {
	t.Helper()
	c, err := Open(context.Background(), Options{URL: url, Tokens: tokens, Instance: name, Heartbeat: 50 * time.Millisecond,
		HistoryBytes: budget, Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	o.Shared, o.Instance = c, name
	h := hub.New(o)
	if err := c.Start(h, func() int { return 0 }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(); c.Close() })
	select {
	case <-c.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("cluster never ready")
	}
	return &instance{hub: h, c: c}
}

// settle waits until every instance has heard the bucket as it is now
// and evicted what its writes owe.
func settle(t *testing.T, ins ...*instance) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rev, err := ins[0].c.lastRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if err := in.c.budget.waitIdle(ctx, rev); err != nil {
			t.Fatalf("instance %s never evicted what it owes: %v", in.c.Instance(), err)
		}
	}
}

// stored is room's records in the bucket, oldest asked first, and what
// they take there (keys and values).
func stored(t *testing.T, c *Cluster, room string) ([]string, int64) {
	t.Helper()
	type rec struct {
		id string
		at time.Time
	}
	var recs []rec
	var size int64
	if err := c.roomRecords(context.Background(), room, func(e jetstream.KeyValueEntry) error {
		r, err := decode(e.Value())
		if err != nil {
			return err
		}
		recs = append(recs, rec{r.ID, r.CreatedAt})
		size += int64(len(e.Key()) + len(e.Value()))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(recs, func(a, b rec) int { return a.at.Compare(b.at) })
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.id)
	}
	return ids, size
}

// answerOn asks id of token through from and answers it through to,
// once to has heard it (its device cl got it).
func answerOn(t *testing.T, from, to *instance, cl *client, token, id, answer string) {
	t.Helper()
	done := make(chan result, 1)
	go func() {
		rep, err := from.hub.Ask(context.Background(), token, question(id, "Screenshot "+id+"?"))
		done <- result{rep, err}
	}()
	heard(t, cl, id)
	if err := to.hub.Answer(context.Background(), token, wire.AskQuestion, id, reply(cl.id, answer)); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil {
		t.Fatalf("Ask %s: %v", id, r.err)
	}
}

// heard waits for cl to be shown question id, whatever else it is sent.
func heard(t *testing.T, cl *client, id string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-cl.frames:
			if m.Cmd == wire.CmdAskQuestion && m.GetAskQuestionRequest().GetID() == id {
				return
			}
		case <-deadline:
			t.Fatalf("%s was never shown %s", cl.id, id)
		}
	}
}

// TestHistoryBudgetAcrossInstances: one token's devices answer, through
// two instances, far past its history budget. The records in NATS had
// no bound but their age: the token could fill NATS's storage. Now its
// oldest settled records go, its pending question and the answer kept
// for its absent agent stay (the agent's next call gets it), the
// newest answers stay, another token's history is whole, and each
// instance logs its evictions once.
func TestHistoryBudgetAcrossInstances(t *testing.T) {
	ns := natstest.Start(t)
	const budget, each = 64 << 10, 10 << 10
	tokens := []string{tok, tok2}
	// Outcomes for re-attaching agents are kept past the newest only
	// within a byte: the older ones are history only, the budget's.
	o := hub.Options{OrphanNotice: time.Hour, RetentionBytes: 1}
	var logA, logB syncBuffer
	a := budgeted(t, ns.URL(), "a", budget, tokens, o, &logA)
	b := budgeted(t, ns.URL(), "b", budget, tokens, o, &logB)
	onA, onB, other := newClient("pa"), newClient("pb"), newClient("po")
	a.hub.Join(tok, onA, nil, hub.Resume{})
	b.hub.Join(tok, onB, nil, hub.Resume{})
	b.hub.Join(tok2, other, nil, hub.Resume{})
	big := strings.Repeat("x", each)

	for i := range 3 {
		answerOn(t, b, b, other, tok2, fmt.Sprint("o", i), big)
	}
	// The oldest: an answer given after its agent left, kept for the
	// project's next call.
	ctx, cancel := context.WithCancel(context.Background())
	gone := ask(ctx, a, question("gone", "Anyone?"))
	heard(t, onA, "gone")
	heard(t, onB, "gone")
	cancel()
	wait(t, gone)
	if err := a.hub.Answer(context.Background(), tok, wire.AskQuestion, "gone", reply("pa", "kept "+big)); err != nil {
		t.Fatal(err)
	}
	// Next: a question nobody answers.
	_ = ask(context.Background(), a, question("waiting", "Still there?"))
	heard(t, onA, "waiting")
	heard(t, onB, "waiting")
	// Then answers far past the budget, asked through one instance and
	// answered through the other, in turn.
	for i := range 20 {
		from, to, cl := a, b, onB
		if i%2 == 1 {
			from, to, cl = b, a, onA
		}
		answerOn(t, from, to, cl, tok, fmt.Sprint("s", i), big)
	}
	settle(t, a, b)

	ids, size := stored(t, a.c, store.Room(tok))
	if size > budget {
		t.Errorf("the token's records take %d bytes in NATS, past its budget of %d", size, budget)
	}
	for _, want := range []string{"gone", "waiting", "s19"} {
		if !slices.Contains(ids, want) {
			t.Errorf("the token's records %v lack %s", ids, want)
		}
	}
	if slices.Contains(ids, "s0") || len(ids) < 4 {
		t.Errorf("the token's records are %v: want the newest answers, not the oldest", ids)
	}
	if ids, _ := stored(t, a.c, store.Room(tok2)); !slices.Equal(ids, []string{"o0", "o1", "o2"}) {
		t.Errorf("the other token's records are %v, want all three", ids)
	}
	lines := 0
	for _, l := range []*syncBuffer{&logA, &logB} {
		n := strings.Count(l.String(), "history went over its bytes in NATS")
		if n > 1 {
			t.Errorf("an instance logged the evictions %d times, want once:\n%s", n, l.String())
		}
		if strings.Contains(l.String(), tok) {
			t.Errorf("an instance logged the token:\n%s", l.String())
		}
		lines += n
	}
	if lines == 0 {
		t.Error("the evictions were never logged")
	}

	// The kept answer reaches the project's next call; the pending
	// question is still answered.
	if ms := b.hub.TakeMissed(tok, "/src", nil, 0); len(ms) != 1 || ms[0].ID != "gone" || text(ms[0].Reply) != "kept "+big {
		t.Fatalf("the answer kept for the absent agent: %+v", ms)
	}
	if err := b.hub.Answer(context.Background(), tok, wire.AskQuestion, "waiting", reply("pb", "yes")); err != nil {
		t.Fatalf("the pending question after the evictions: %v", err)
	}
}

// TestHistoryBudgetEvictorsAtOnce: rooms over a budget set only now (a
// lowered setting) are brought within it by every instance that starts,
// three at once. Each deletes by compare-and-set, oldest first, and
// stops where another was first: together they delete the oldest, and
// not one record more than the budget asks.
func TestHistoryBudgetEvictorsAtOnce(t *testing.T) {
	ns := natstest.Start(t)
	const budget, each, n = 32 << 10, 4 << 10, 24
	var tokens []string
	for i := range 6 {
		tokens = append(tokens, fmt.Sprintf("cluster-token-many-%d-0123456789", i))
	}
	filler, err := Open(context.Background(), Options{URL: ns.URL(), Tokens: tokens, Instance: "filler"})
	if err != nil {
		t.Fatal(err)
	}
	// Asked and settled two hours ago: no agent may come back for them.
	t0 := time.Now().Add(-2 * time.Hour)
	var sizes []int64 // of one room's records, in order; the same in every room
	for _, token := range tokens {
		room := store.Room(token)
		sizes = sizes[:0]
		for i := range n {
			at := t0.Add(time.Duration(i) * time.Second)
			rec := hub.SharedRecord{Record: store.Record{Room: room, ID: fmt.Sprintf("r%02d", i), Kind: int(wire.AskQuestion),
				Text: "q", Status: store.Answered, Reply: []byte(`"` + strings.Repeat("y", each) + `"`), CreatedAt: at, ClosedAt: at}}
			if _, err := filler.Create(context.Background(), rec); err != nil {
				t.Fatal(err)
			}
			v, _ := encode(rec)
			sizes = append(sizes, int64(len(key(room, rec.ID))+len(v)))
		}
	}
	filler.Close()
	// The newest that fit: the oldest go until the rest is within.
	var want []string
	var total int64
	for i := n - 1; i >= 0 && total+sizes[i] <= budget; i-- {
		total += sizes[i]
		want = append([]string{fmt.Sprintf("r%02d", i)}, want...)
	}

	ins := make([]*instance, 3)
	var wg sync.WaitGroup
	var logs [3]syncBuffer
	for i := range ins {
		wg.Go(func() {
			ins[i] = budgeted(t, ns.URL(), fmt.Sprint("e", i), budget, tokens, hub.Options{OrphanNotice: time.Hour}, &logs[i])
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	settle(t, ins...)
	for _, token := range tokens {
		if got, size := stored(t, ins[0].c, store.Room(token)); !slices.Equal(got, want) {
			t.Errorf("a room keeps %v (%d bytes), want %v (%d bytes)", got, size, want, total)
		}
	}
}

// TestHistoryBudgetPassFindsItsOldestGone: a pass whose oldest victim
// was deleted by another instance's pass before this instance heard it
// stops there (compare-and-set), and the room was left over its budget
// until its next write: the other's pass had brought it within the
// budget as it was before this instance's write, not after. Now the
// room is looked at again once the bucket is heard as it is now.
func TestHistoryBudgetPassFindsItsOldestGone(t *testing.T) {
	ns := natstest.Start(t)
	const each, n = 4 << 10, 6
	a := budgeted(t, ns.URL(), "a", 0, []string{tok}, hub.Options{OrphanNotice: time.Hour}, &syncBuffer{})
	room := store.Room(tok)
	ctx := context.Background()
	// An index of this instance's fed by hand, so that it has not heard
	// the other instance's deletion when its pass runs.
	bud := newHistoryBudget(a.c, 1<<30)
	t0 := time.Now().Add(-2 * time.Hour)
	var revs []uint64
	var size int64
	for i := range n {
		at := t0.Add(time.Duration(i) * time.Second)
		rec := hub.SharedRecord{Record: store.Record{Room: room, ID: fmt.Sprintf("r%02d", i), Kind: int(wire.AskQuestion),
			Text: "q", Status: store.Answered, Reply: []byte(`"` + strings.Repeat("y", each) + `"`), CreatedAt: at, ClosedAt: at}}
		rev, err := a.c.Create(ctx, rec)
		if err != nil {
			t.Fatal(err)
		}
		e, err := a.c.reqs.Get(ctx, key(room, rec.ID))
		if err != nil {
			t.Fatal(err)
		}
		bud.heard(e, &rec)
		revs = append(revs, rev)
		size = int64(len(e.Key()) + len(e.Value()))
	}
	// Room for three: the oldest three go.
	bud.limit = 3 * size
	// The other instance's pass deletes the oldest.
	if err := a.c.reqs.Delete(ctx, key(room, "r00"), jetstream.LastRevision(revs[0])); err != nil {
		t.Fatal(err)
	}
	bud.keeps = hub.Keeps{}
	bud.owed[room] = 0
	pass := func() {
		t.Helper()
		r, ok := bud.next()
		if !ok {
			return
		}
		if err := bud.evict(ctx, r); err != nil {
			t.Fatal(err)
		}
		bud.mu.Lock()
		bud.busy = false
		bud.mu.Unlock()
	}
	pass()
	bud.mu.Lock()
	owed, again := bud.owed[room]
	applied := bud.applied
	bud.mu.Unlock()
	if !again || owed <= applied {
		t.Fatalf("a pass that found its oldest gone left the room owing nothing (owed %v at %d, heard %d)", again, owed, applied)
	}
	// This instance hears the deletion: the pass runs again, from what
	// is there now.
	w, err := a.c.reqs.Watch(ctx, "r."+room+".*", jetstream.IncludeHistory())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	for e := range w.Updates() {
		if e == nil {
			break
		}
		if e.Revision() > applied {
			bud.heard(e, nil)
		}
	}
	pass()
	if ids, got := stored(t, a.c, room); got > bud.limit || !slices.Equal(ids, []string{"r03", "r04", "r05"}) {
		t.Errorf("the room keeps %v (%d bytes), want the newest three within %d", ids, got, bud.limit)
	}
}

// waitIdle waits until the index has heard revision rev and no pass is
// running or owed: what the writes up to rev took past the budget is
// evicted.
func (b *historyBudget) waitIdle(ctx context.Context, rev uint64) error {
	stop := context.AfterFunc(ctx, func() {
		b.mu.Lock()
		b.idle.Broadcast()
		b.mu.Unlock()
	})
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.applied < rev || b.busy || len(b.owed) > 0 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.idle.Wait()
	}
	return nil
}
