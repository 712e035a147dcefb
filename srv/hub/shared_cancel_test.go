package hub

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// slowShared is a Shared whose Create lands only when the test says so,
// failing with the context's error if the context ended first (as a
// client library does when its caller gives up before the ack).
type slowShared struct {
	mu      sync.Mutex
	land    chan struct{}
	recs    map[string]SharedRecord
	revs    map[string]uint64
	rev     uint64
	updates []SharedRecord
}

func (s *slowShared) Create(ctx context.Context, rec SharedRecord) (uint64, error) {
	select {
	case <-s.land:
	case <-ctx.Done():
		// The write goes out anyway (it was sent); only the ack is lost.
		s.put(rec)
		return 0, ctx.Err()
	}
	return s.put(rec), nil
}

func (s *slowShared) put(rec SharedRecord) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	s.recs[rec.ID], s.revs[rec.ID] = rec, s.rev
	return s.rev
}

func (s *slowShared) Get(_ context.Context, _, id string) (SharedRecord, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.recs[id]
	if !ok {
		return SharedRecord{}, 0, errors.New("no such record")
	}
	return rec, s.revs[id], nil
}

func (s *slowShared) Epoch() string { return "slow" }

func (s *slowShared) Update(_ context.Context, rec SharedRecord, rev uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.revs[rec.ID] != rev {
		return 0, ErrRecordChanged
	}
	s.rev++
	s.recs[rec.ID], s.revs[rec.ID] = rec, s.rev
	s.updates = append(s.updates, rec)
	return s.rev, nil
}

// TestSharedCreateOutlivesTheCaller: an agent that gives up while its
// request is being written to the shared store does not leave a request
// every instance shows with nobody to say no agent waits: the write is
// finished, and the request is orphaned as any other whose caller left.
func TestSharedCreateOutlivesTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := &slowShared{land: make(chan struct{}), recs: map[string]SharedRecord{}, revs: map[string]uint64{}}
		h := New(Options{Shared: sh, Instance: "a", OrphanNotice: time.Second, OrphanGrace: time.Minute})
		defer h.Close()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := h.Ask(ctx, "tok", Request{Kind: wire.AskQuestion, ID: "q", Text: "Anyone?", Timeout: time.Hour})
			done <- err
		}()
		synctest.Wait() // Create waits for its ack
		cancel()
		synctest.Wait()
		close(sh.land) // the write lands after the caller gave up
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("the call ended with %v", err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if len(sh.updates) == 0 || !sh.updates[len(sh.updates)-1].Gone {
			t.Fatalf("no agent-gone mark was written for a request whose caller left: %+v", sh.updates)
		}
	})
}

// failingShared refuses every Create (its ack timed out), though the
// write may land later: the test then plays the cluster's watcher.
type failingShared struct{ slowShared }

func (s *failingShared) Create(context.Context, SharedRecord) (uint64, error) {
	return 0, context.DeadlineExceeded
}

// TestRefusedRequestLandingLateIsWithdrawn: a request the agent was told
// could not be saved, whose write lands after all (a frozen NATS, a
// reconnect buffer), is not left on every screen with nobody waiting for
// it: its holder withdraws it at once, and shows it to no one.
func TestRefusedRequestLandingLateIsWithdrawn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := &failingShared{slowShared{recs: map[string]SharedRecord{}, revs: map[string]uint64{}}}
		h := New(Options{Shared: sh, Instance: "a", OrphanNotice: time.Second, OrphanGrace: time.Minute})
		defer h.Close()
		phone := newFake("p")
		h.Join("tok", phone, nil, Resume{})
		req := Request{Kind: wire.AskQuestion, ID: "late", Text: "Anyone?", Timeout: time.Hour}
		if _, err := h.Ask(context.Background(), "tok", req); err == nil {
			t.Fatal("the ask was not refused")
		}
		// The write lands now, and the watcher hears it.
		now := time.Now()
		rec := SharedRecord{Record: h.record(h.room("tok"), &pending{req: req, createdAt: now, deadline: now.Add(req.Timeout)}, store.Pending, nil, ""), Holder: "a"}
		rev := sh.put(rec)
		h.Apply("tok", rec, rev)
		synctest.Wait()
		sh.mu.Lock()
		final := sh.recs["late"]
		sh.mu.Unlock()
		if final.Status == store.Pending {
			t.Fatal("the refused request stays pending in the cluster")
		}
		for _, c := range phone.cmds() {
			if c == NoteAsked {
				t.Fatalf("the refused request was shown: %v", phone.cmds())
			}
		}
	})
}

// TestHeldRequestWithoutCallerIsOrphaned: a pending request this
// instance holds but nobody here waits for (heard after a restart, or a
// caller that never registered) gets the agent-gone notice and is
// withdrawn after the grace, as one whose caller left.
func TestHeldRequestWithoutCallerIsOrphaned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := &slowShared{recs: map[string]SharedRecord{}, revs: map[string]uint64{}}
		h := New(Options{Shared: sh, Instance: "a", OrphanNotice: time.Second, OrphanGrace: time.Minute})
		defer h.Close()
		req := Request{Kind: wire.AskQuestion, ID: "held", Text: "Anyone?", Timeout: time.Hour}
		now := time.Now()
		rec := SharedRecord{Record: h.record(h.room("tok"), &pending{req: req, createdAt: now, deadline: now.Add(req.Timeout)}, store.Pending, nil, ""), Holder: "a"}
		h.Apply("tok", rec, sh.put(rec))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		sh.mu.Lock()
		gone := sh.recs["held"].Gone
		sh.mu.Unlock()
		if !gone {
			t.Fatal("no agent-gone mark for a held request nobody waits for")
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if sh.recs["held"].Status == store.Pending {
			t.Fatal("a held request nobody waits for was not withdrawn after the grace")
		}
	})
}

// landingShared lands a Create at once but acks it only when told: the
// record is heard, shown and answered before its ask counts as a waiter.
type landingShared struct {
	slowShared
	landed chan SharedRecord
}

func (s *landingShared) Create(ctx context.Context, rec SharedRecord) (uint64, error) {
	rev := s.put(rec)
	s.landed <- rec
	<-s.land
	return rev, nil
}

// TestAnsweredBeforeTheAskWaits: an answer given between the record's
// landing and its ask counting itself as a waiter goes to that ask, and is
// not marked as given while no agent waited.
func TestAnsweredBeforeTheAskWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh := &landingShared{slowShared{land: make(chan struct{}), recs: map[string]SharedRecord{}, revs: map[string]uint64{}}, make(chan SharedRecord, 1)}
		h := New(Options{Shared: sh, Instance: "a", OrphanNotice: time.Hour, OrphanGrace: time.Hour})
		defer h.Close()
		phone := newFake("p")
		h.Join("tok", phone, nil, Resume{})
		done := make(chan *Reply, 1)
		go func() {
			rep, _ := h.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "quick", Text: "Quick?", Timeout: time.Hour})
			done <- rep
		}()
		rec := <-sh.landed
		sh.mu.Lock()
		rev := sh.revs["quick"]
		sh.mu.Unlock()
		h.Apply("tok", rec, rev) // heard and shown before Create returns
		go func() {
			_ = h.Answer(context.Background(), "tok", wire.AskQuestion, "quick", Reply{ClientID: "p", Nickname: "nick-p"})
		}()
		synctest.Wait()
		sh.mu.Lock()
		settled := sh.recs["quick"]
		sh.mu.Unlock()
		close(sh.land)
		if settled.Status != store.Answered || settled.ClosedNote == ReasonUndelivered {
			t.Fatalf("answered as %q, note %q: its caller was there", settled.Status, settled.ClosedNote)
		}
		if rep := <-done; rep == nil || rep.ClientID != "p" {
			t.Fatalf("the ask got %+v", rep)
		}
	})
}
