package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// clockAt is a hub clock the test sets.
func clockAt(start time.Time) (func() time.Time, func(time.Time)) {
	var ns atomic.Int64
	ns.Store(start.UnixNano())
	return func() time.Time { return time.Unix(0, ns.Load()) }, func(t time.Time) { ns.Store(t.UnixNano()) }
}

// askAnswered asks id through in and answers it there from cl.
func askAnswered(t *testing.T, in *instance, cl *client, id, q, a string) {
	t.Helper()
	done := ask(context.Background(), in, question(id, q))
	cl.expect(t, wire.CmdAskQuestion)
	if err := in.hub.Answer(context.Background(), tok, wire.AskQuestion, id, reply(cl.id, a)); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, done); r.err != nil {
		t.Fatalf("Ask %s: %v", id, r.err)
	}
}

// questions lists the history items' questions, in order.
func questions(t *testing.T, in *instance, before time.Time, limit int) ([]string, bool, int64) {
	t.Helper()
	items, more, err := in.hub.History(tok, before, limit)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var last int64
	for _, it := range items {
		out = append(out, it.Request.Text)
		last = it.AskedAt.UnixMilli()
	}
	return out, more, last
}

// TestHistoryAcrossInstances: questions answered through A are B's
// history, newest first and paged as in one process; the pending one is
// not history. Cleared through B, A's history is empty, and the pending
// question stays answerable.
func TestHistoryAcrossInstances(t *testing.T) {
	ns := natstest.Start(t)
	// A's clock runs ahead (deadlines are armed on B's clock too).
	base := time.Now().Truncate(time.Second)
	later := base.Add(time.Hour)
	now, set := clockAt(base)
	a := startWith(t, ns.URL(), "a", hub.Options{OrphanNotice: time.Hour, Now: now})
	b := start(t, ns.URL(), "b")
	onA := newClient("pa")
	a.hub.Join(tok, onA, nil, hub.Resume{})
	for i := range 5 {
		set(base.Add(time.Duration(i) * time.Minute))
		askAnswered(t, a, onA, fmt.Sprint("h", i), fmt.Sprint("Question ", i), fmt.Sprint("answer ", i))
	}
	set(base.Add(10 * time.Minute))
	open := ask(context.Background(), a, question("open", "Still open?"))
	onA.expect(t, wire.CmdAskQuestion)

	items, more, err := b.hub.History(tok, later, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || !more {
		t.Fatalf("first page: %d items, more %v", len(items), more)
	}
	it := items[0]
	if it.Request.ID != "h4" || it.Request.Text != "Question 4" ||
		it.Status != store.Answered || it.Reply == nil || it.Reply.Nickname != "nick-pa" ||
		it.Reply.Contents[0].GetText().GetText() != "answer 4" ||
		!it.AskedAt.Equal(base.Add(4*time.Minute)) || !it.ClosedAt.Equal(base.Add(4*time.Minute)) {
		t.Fatalf("newest item: %v", it)
	}
	got, more, last := questions(t, b, later, 2)
	if fmt.Sprint(got) != "[Question 4 Question 3]" || !more {
		t.Fatalf("page 1 = %q, more %v", got, more)
	}
	got, more, last = questions(t, b, time.UnixMilli(last), 2)
	if fmt.Sprint(got) != "[Question 2 Question 1]" || !more {
		t.Fatalf("page 2 = %q, more %v", got, more)
	}
	got, more, _ = questions(t, b, time.UnixMilli(last), 2)
	if fmt.Sprint(got) != "[Question 0]" || more {
		t.Fatalf("page 3 = %q, more %v", got, more)
	}
	// A sees the same.
	if got, more, _ := questions(t, a, later, 10); len(got) != 5 || more {
		t.Fatalf("A's history = %q, more %v", got, more)
	}

	n, err := b.hub.ClearHistory(tok)
	if err != nil || n != 5 {
		t.Fatalf("ClearHistory = %d, %v; want 5", n, err)
	}
	for _, in := range []*instance{a, b} {
		if got, more, _ := questions(t, in, later, 10); len(got) != 0 || more {
			t.Fatalf("history after the clear = %q, more %v", got, more)
		}
	}
	// The pending question stayed: answered now, it is the history.
	if err := a.hub.Answer(context.Background(), tok, wire.AskQuestion, "open", reply("pa", "yes")); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, open); r.err != nil || text(r.rep) != "yes" {
		t.Fatalf("pending question = %+v, %v", r.rep, r.err)
	}
	if got, more, _ := questions(t, b, later, 10); fmt.Sprint(got) != "[Still open?]" || more {
		t.Fatalf("history after the pending one was answered = %q, more %v", got, more)
	}
}

// TestHistoryClearKeepsAnswerForAbsentAgent: an answer given while no
// agent waited is not cleared away before its agent's next call takes it.
func TestHistoryClearKeepsAnswerForAbsentAgent(t *testing.T) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	onA, onB := newClient("pa"), newClient("pb")
	a.hub.Join(tok, onA, nil, hub.Resume{})
	b.hub.Join(tok, onB, nil, hub.Resume{})
	ctx, cancel := context.WithCancel(context.Background())
	gone := ask(ctx, a, question("gone", "Anyone?"))
	onA.expect(t, wire.CmdAskQuestion)
	cancel()
	wait(t, gone)
	if err := a.hub.Answer(context.Background(), tok, wire.AskQuestion, "gone", reply("pa", "kept")); err != nil {
		t.Fatal(err)
	}
	onB.expect(t, wire.CmdAskQuestion)
	onB.expect(t, wire.CmdAskQuestionReplyNotification) // B heard the answer
	if _, err := b.hub.ClearHistory(tok); err != nil {
		t.Fatal(err)
	}
	got := b.hub.TakeMissed(tok, "/src", nil, 0)
	if len(got) != 1 || text(got[0].Reply) != "kept" {
		t.Fatalf("TakeMissed after the clear = %+v", got)
	}
	// Handed over, it is history like any other, and a clear takes it.
	if n, err := a.hub.ClearHistory(tok); err != nil || n != 1 {
		t.Fatalf("second clear = %d, %v", n, err)
	}
}

// TestHistoryReadIsBounded: a room holding more records than one call may
// read gets an error, not an unbounded read.
func TestHistoryReadIsBounded(t *testing.T) {
	ns := natstest.Start(t)
	c, err := Open(context.Background(), Options{URL: ns.URL(), Tokens: []string{tok}, Instance: "a", HistoryScan: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	room := store.Room(tok)
	put := func(room, id string) {
		t.Helper()
		rec := hub.SharedRecord{Record: store.Record{Room: room, ID: id, Kind: int(wire.AskQuestion), Text: "q",
			CreatedAt: time.Now(), ClosedAt: time.Now(), Status: store.Cancelled}}
		if _, err := c.Create(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		put(room, fmt.Sprint("r", i))
	}
	// Another room's records are not read: this one's three are.
	put(store.Room("another-token-0123456789"), "x")
	if recs, _, err := c.History(context.Background(), room, time.Now(), 10); err != nil || len(recs) != 3 {
		t.Fatalf("History of 3 records with a cap of 3 = %d, %v", len(recs), err)
	}
	put(room, "r3")
	if _, _, err := c.History(context.Background(), room, time.Now(), 10); err == nil {
		t.Fatal("History read a room of 4 records with a cap of 3")
	}
	// A clear is not capped: it deletes as it reads.
	if n, err := c.ClearHistory(context.Background(), room, nil); err != nil || n != 4 {
		t.Fatalf("ClearHistory = %d, %v; want 4", n, err)
	}
	recs, more, err := c.History(context.Background(), room, time.Now(), 10)
	if err != nil || len(recs) != 0 || more {
		t.Fatalf("History after the clear = %d records, more %v, %v", len(recs), more, err)
	}
}

// TestHistoryPageBoundedByBytes: a cluster's history page is bounded by
// its bytes as one server's is (store.HistoryPageBytes of questions,
// choices and answers), not by its count alone: 200 answers of the
// largest a cluster takes were a page of 200 MiB, read, decoded and sent
// as one /ws frame, as often as a token's holder asked. Past the bound
// the page ends early saying there is more, paging on reaches every
// record, and one record larger than the bound comes alone.
func TestHistoryPageBoundedByBytes(t *testing.T) {
	ns := natstest.Start(t)
	open := func(o Options) *Cluster {
		t.Helper()
		o.URL, o.Tokens, o.Instance = ns.URL(), []string{tok}, "a"
		c, err := Open(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c := open(Options{})
	room := store.Room(tok)
	t0 := time.Now().Add(-time.Hour)
	put := func(id string, at time.Time, text string) {
		t.Helper()
		rec := hub.SharedRecord{Record: store.Record{Room: room, ID: id, Kind: int(wire.AskQuestion), Text: text,
			CreatedAt: at, ClosedAt: at, Status: store.Cancelled}}
		if _, err := c.Create(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	// Each fits NATS's default max_payload (1 MiB); twelve are past the
	// bound.
	const n, each = 12, 900_000
	for i := range n {
		put(fmt.Sprint("big", i), t0.Add(time.Duration(i)*time.Minute), strings.Repeat(string(rune('a'+i)), each))
	}
	before, seen, pages := time.Now(), 0, 0
	for {
		recs, more, err := c.History(context.Background(), room, before, 200)
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, r := range recs {
			size += len(r.Text) + len(r.Questions) + len(r.Reply)
		}
		if size > store.HistoryPageBytes {
			t.Fatalf("page %d holds %d records, %d bytes, past %d", pages, len(recs), size, store.HistoryPageBytes)
		}
		seen += len(recs)
		pages++
		if !more {
			break
		}
		if len(recs) == 0 {
			t.Fatal("an empty page says there is more")
		}
		before = recs[len(recs)-1].CreatedAt
	}
	if seen != n || pages != 2 {
		t.Errorf("paging reached %d records in %d pages, want %d in 2", seen, pages, n)
	}

	// A record larger than the bound comes alone (a smaller bound here:
	// NATS's default max_payload keeps records under 1 MiB).
	small := open(Options{historyBytes: 2 * each})
	got, more, err := small.History(context.Background(), room, time.Now(), 200)
	if err != nil || len(got) != 2 || !more {
		t.Fatalf("a page of a %d-byte bound: %d records, more %v, %v; want 2 and more", 2*each, len(got), more, err)
	}
	tiny := open(Options{historyBytes: each - 1})
	got, more, err = tiny.History(context.Background(), room, time.Now(), 200)
	if err != nil || len(got) != 1 || got[0].ID != fmt.Sprint("big", n-1) || !more {
		t.Errorf("a record past the bound: %d records, more %v, %v; want the newest alone, and more", len(got), more, err)
	}
}
