package hub

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// bus is a Shared whose changes reach the instances (Apply) only when
// the test delivers them, so it decides who hears what first.
type bus struct {
	mu   sync.Mutex
	recs map[string]SharedRecord
	revs map[string]uint64
	rev  uint64
	log  []SharedRecord // every change, its revision its index + 1
}

func newBus() *bus { return &bus{recs: map[string]SharedRecord{}, revs: map[string]uint64{}} }

func (b *bus) putLocked(rec SharedRecord) uint64 {
	b.rev++
	b.recs[rec.ID], b.revs[rec.ID] = rec, b.rev
	b.log = append(b.log, rec)
	return b.rev
}

func (b *bus) Create(_ context.Context, rec SharedRecord) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.recs[rec.ID]; ok {
		return 0, ErrRecordExists
	}
	return b.putLocked(rec), nil
}

func (b *bus) Get(_ context.Context, _, id string) (SharedRecord, uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	rec, ok := b.recs[id]
	if !ok {
		return rec, 0, ErrRecordMissing // as the stores say
	}
	return rec, b.revs[id], nil
}

func (b *bus) Update(_ context.Context, rec SharedRecord, rev uint64) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.revs[rec.ID] != rev {
		return 0, ErrRecordChanged
	}
	return b.putLocked(rec), nil
}

func (b *bus) Epoch() string { return "bus" }

// node is an instance on the bus and how far it has heard.
type node struct {
	h     *Hub
	heard int
}

// instances starts instances a, b and c of one hub on shared, with o's
// other settings; they close when the test ends.
func instances(t *testing.T, shared Shared, o Options) []*node {
	var nodes []*node
	for _, name := range []string{"a", "b", "c"} {
		o.Shared, o.Instance = shared, name
		h := New(o)
		t.Cleanup(h.Close)
		nodes = append(nodes, &node{h: h})
	}
	return nodes
}

// noneGivesIt fails t if an instance hands the project's next call an
// answer: its agent had it already.
func noneGivesIt(t *testing.T, nodes []*node) {
	t.Helper()
	for i, n := range nodes {
		if got := n.h.TakeMissed("tok", "/p", nil, 0); len(got) != 0 {
			t.Fatalf("instance %d gave it again: %+v", i, got)
		}
	}
}

// askedThroughA starts instances a, b and c on shared with o's other
// settings, and the agent's call through a of req, the question q of
// the project /p; cancel ends the call. No instance has heard of it.
func askedThroughA(t *testing.T, shared Shared, o Options) (nodes []*node, req Request, cancel context.CancelFunc) {
	nodes = instances(t, shared, o)
	req = Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "Which colour?", Timeout: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = nodes[0].h.Ask(ctx, "tok", req) }()
	synctest.Wait()
	return nodes, req, cancel
}

// notGivenAgain: A, with no caller for the answer its agent had through
// B, hears it, and C hears whatever A wrote before B does; then every
// instance hears all. The project's next call must not be handed the
// answer, through C at first nor through any instance after.
func (b *bus) notGivenAgain(t *testing.T, nodes []*node) {
	t.Helper()
	a, bn, c := nodes[0], nodes[1], nodes[2]
	b.deliver(a)
	synctest.Wait()
	b.deliver(c)
	if got := c.h.TakeMissed("tok", "/p", nil, 0); len(got) != 0 {
		t.Fatalf("the project's next call through C was handed the answer its agent had: %+v", got)
	}
	for range 2 {
		b.deliver(a, bn, c)
		synctest.Wait()
	}
	noneGivesIt(t, nodes)
}

// deliver applies to n the changes it has not heard, in order.
func (b *bus) deliver(nodes ...*node) {
	for _, n := range nodes {
		b.mu.Lock()
		todo := b.log[n.heard:]
		first := n.heard
		n.heard = len(b.log)
		b.mu.Unlock()
		for i, rec := range todo {
			n.h.Apply("tok", rec, uint64(first+i+1))
		}
	}
}

func (b *bus) last() SharedRecord {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.log[len(b.log)-1]
}

// TestSharedAnswerJustAfterTheCallLeft: the agent's call through A goes,
// and an answer is given on B before A has said no agent waits (Gone):
// B writes it as delivered. A, its holder, has no caller for it and marks
// it undelivered; every instance keeps it, and the project's next call,
// through any of them, gets it, once. If a caller had it meanwhile (it
// re-attached by ID on C before A's mark), it is handed over, not kept.
func TestSharedAnswerJustAfterTheCallLeft(t *testing.T) {
	for _, reattach := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			b := newBus()
			nodes, req, cancel := askedThroughA(t, b, Options{OrphanNotice: time.Hour, OrphanGrace: time.Hour})
			a, bn, c := nodes[0], nodes[1], nodes[2]
			b.deliver(a, bn, c)
			cancel() // the agent's call goes
			synctest.Wait()

			if err := bn.h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("Blue.")); err != nil {
				t.Fatal(err)
			}
			if n := b.last().ClosedNote; n != "" {
				t.Fatalf("B wrote the answer with the note %q", n)
			}
			b.deliver(bn, c)
			if reattach {
				rep, err := c.h.Ask(context.Background(), "tok", req)
				if err != nil || rep == nil {
					t.Fatalf("re-attach on C: %v %v", rep, err)
				}
			}
			b.deliver(a) // A hears the answer: it had no caller
			synctest.Wait()
			b.deliver(a, bn, c)
			synctest.Wait()
			b.deliver(a, bn, c)
			if reattach {
				if n := b.last().ClosedNote; n != ReasonHandedOver {
					t.Fatalf("after C's caller had it: the note is %q", n)
				}
				noneGivesIt(t, nodes)
				return
			}
			if n := b.last().ClosedNote; n != ReasonUndelivered {
				t.Fatalf("A left the note %q", n)
			}
			got := c.h.TakeMissed("tok", "/p", nil, 0)
			if len(got) != 1 || got[0].ID != "q" || got[0].Reply.Contents[0].GetText().GetText() != "Blue." {
				t.Fatalf("C's TakeMissed = %+v", got)
			}
			b.deliver(a, bn, c)
			noneGivesIt(t, nodes)
		})
	}
}
