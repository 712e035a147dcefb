package hub

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// gate holds each write to the journal until the test lets it through.
type gate struct {
	store.JournalFile
	waiting chan struct{} // a write is waiting
	pass    chan struct{} // lets one through
}

func (g *gate) Write(b []byte) (int, error) {
	g.waiting <- struct{}{}
	<-g.pass
	return g.JournalFile.Write(b)
}

func gatedStore(t *testing.T) (*store.Store, *gate) {
	t.Helper()
	g := &gate{waiting: make(chan struct{}, 1), pass: make(chan struct{})}
	db, err := store.Open(t.TempDir(), store.Options{WrapJournal: func(f store.JournalFile) store.JournalFile {
		g.JournalFile = f
		return g
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(g.pass) // let any write left through
		_ = db.Close()
	})
	return db, g
}

// A question reaches the screens, and an answer the agent and the other
// screens, only once it is in the journal: not while its write waits.
func TestNothingAnnouncedBeforeItIsSaved(t *testing.T) {
	db, g := gatedStore(t)
	h := New(Options{Store: db})
	a, b := newFake("a"), newFake("b")
	h.Join("tok", a, nil, Resume{})
	h.Join("tok", b, nil, Resume{})

	rc, ec := ask(h, "tok", "q", time.Minute, context.Background())
	<-g.waiting // the question's record is being written
	if got := a.cmds(); len(got) != 0 {
		t.Fatalf("shown before it was saved: %v", got)
	}
	if ps, _ := h.PendingMessages("tok"); len(ps) != 0 || h.Validity("tok", []string{"q"})["q"] {
		t.Fatalf("listed before it was saved: %v", ps)
	}
	if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "q", Reply{ClientID: "a"}); !errors.Is(err, ErrNotPending) {
		t.Fatalf("answered before it was shown: %v", err)
	}
	g.pass <- struct{}{}
	a.waitFor(t, NoteAsked)
	b.waitFor(t, NoteAsked)

	answered := make(chan error, 1)
	go func() {
		answered <- h.Answer(context.Background(), "tok", wire.AskQuestion, "q", Reply{ClientID: "a", Nickname: "pc"})
	}()
	<-g.waiting // the answer's record is being written
	select {
	case r := <-rc:
		t.Fatalf("the agent had the answer before it was saved: %+v", r)
	case err := <-answered:
		t.Fatalf("Answer returned before the answer was saved: %v", err)
	default:
	}
	for _, c := range b.cmds() {
		if c == NoteAnswered {
			t.Fatal("another screen was told before the answer was saved")
		}
	}
	g.pass <- struct{}{}
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if r := <-rc; r == nil || r.Nickname != "pc" || <-ec != nil {
		t.Fatalf("reply %+v", r)
	}
	b.waitFor(t, NoteAnswered)
}

// A question withdrawn while its record is being written is never shown.
func TestWithdrawnBeforeShown(t *testing.T) {
	db, g := gatedStore(t)
	h := New(Options{Store: db})
	a := newFake("a")
	h.Join("tok", a, nil, Resume{})
	_, ec := ask(h, "tok", "q", time.Minute, context.Background())
	<-g.waiting
	cancelled := make(chan error, 1)
	go func() { cancelled <- h.Cancel(context.Background(), "tok", "q") }()
	for !settling(h, "tok", "q") {
		runtime.Gosched()
	}
	g.pass <- struct{}{} // the question
	<-g.waiting
	g.pass <- struct{}{} // its withdrawal
	if err := <-cancelled; err != nil {
		t.Fatal(err)
	}
	if err := <-ec; !errors.Is(err, ErrWithdrawn) {
		t.Fatalf("the agent was told %v", err)
	}
	if got := a.cmds(); len(got) != 0 {
		t.Fatalf("a screen was told %v about a question it never saw", got)
	}
}

// settling reports whether an outcome of the request is being saved.
func settling(h *Hub, token, id string) bool {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pending[id]
	return p != nil && p.settling
}
