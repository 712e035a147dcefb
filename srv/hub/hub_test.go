package hub

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

type fakeClient struct {
	id   string
	mu   sync.Mutex
	got  []*Note
	wake chan struct{}
}

func newFake(id string) *fakeClient {
	return &fakeClient{id: id, wake: make(chan struct{}, 100)}
}

func (f *fakeClient) ID() string       { return f.id }
func (f *fakeClient) Nickname() string { return "nick-" + f.id }

func (f *fakeClient) ConnectedAt() time.Time { return time.Unix(0, 0) }

func (f *fakeClient) Send(n *Note) bool {
	f.mu.Lock()
	f.got = append(f.got, n)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	return true
}

// cmds lists the kinds of the notes received, without presence.
func (f *fakeClient) cmds() []NoteKind {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []NoteKind
	for _, m := range f.got {
		if m.Kind != NotePresence {
			out = append(out, m.Kind)
		}
	}
	return out
}

func (f *fakeClient) waitFor(t *testing.T, kind NoteKind) *Note {
	t.Helper()
	deadline := time.After(2 * time.Second)
	for {
		f.mu.Lock()
		for _, m := range f.got {
			if m.Kind == kind {
				f.mu.Unlock()
				return m
			}
		}
		f.mu.Unlock()
		select {
		case <-f.wake:
		case <-deadline:
			t.Fatalf("client %s never got a note of kind %d; got %v", f.id, kind, f.cmds())
		}
	}
}

func ask(h *Hub, token, id string, timeout time.Duration, ctx context.Context) (chan *Reply, chan error) {
	rc, ec := make(chan *Reply, 1), make(chan error, 1)
	go func() {
		r, err := h.Ask(ctx, token, Request{Kind: wire.AskQuestion, ID: id, Text: "q?", Timeout: timeout})
		rc <- r
		ec <- err
	}()
	return rc, ec
}

func pendingOf(h *Hub, token string) []*Note {
	ps, _ := h.PendingMessages(token)
	return ps
}

// Every test of the hub runs in a synctest bubble: its timers (deadlines,
// orphan grace, presence flushes) fire on the bubble's clock, and
// synctest.Wait stands for "everything the hub started has settled", so no
// test sleeps or polls, and none depends on how busy the machine is.

func TestFirstAnswerWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{})
		defer h.Close()
		a, b, other := newFake("a"), newFake("b"), newFake("x")
		h.Join("tok", a, nil, Resume{})
		h.Join("tok", b, nil, Resume{})
		h.Join("other", other, nil, Resume{})

		rc, ec := ask(h, "tok", "r1", time.Minute, context.Background())
		a.waitFor(t, NoteAsked)
		b.waitFor(t, NoteAsked)

		if err := h.Answer(context.Background(), "tok", wire.TaskFinish, "r1", Reply{ClientID: "a"}); !errors.Is(err, ErrNotPending) {
			t.Fatalf("answer of the wrong kind: %v", err)
		}
		if err := h.Answer(context.Background(), "other", wire.AskQuestion, "r1", Reply{ClientID: "x"}); !errors.Is(err, ErrNotPending) {
			t.Fatalf("answer from another token: %v", err)
		}
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "r1", Reply{ClientID: "a", Meta: map[string]string{"k": "v"}}); err != nil {
			t.Fatal(err)
		}
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "r1", Reply{ClientID: "b"}); !errors.Is(err, ErrNotPending) {
			t.Fatalf("second answer: %v", err)
		}
		if r := <-rc; r == nil || r.ClientID != "a" || r.Meta["k"] != "v" {
			t.Fatalf("reply = %+v", r)
		}
		if err := <-ec; err != nil {
			t.Fatal(err)
		}
		n := b.waitFor(t, NoteAnswered)
		if n.Request.ID != "r1" || n.Reply.Meta["k"] != "v" {
			t.Errorf("notification = %v", n)
		}
		if got := a.cmds(); len(got) != 1 {
			t.Errorf("answering client got %v, want only the request", got)
		}
		if got := other.cmds(); len(got) != 0 {
			t.Errorf("client of another token got %v", got)
		}
		if ps := pendingOf(h, "tok"); len(ps) != 0 {
			t.Errorf("still pending: %v", ps)
		}
	})
}

// cancelReason is the reason of the RequestCancelled c got for id, "" when
// none came.
func cancelReason(c *fakeClient, id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.got {
		if m.Kind == NoteClosed && m.Request.ID == id {
			return m.Reason
		}
	}
	return ""
}

// TestTimeoutCancelAndOrphan: a request times out at its deadline, not
// before; one whose caller went away stays pending for exactly the orphan
// grace, then is withdrawn as abandoned; an explicit cancel withdraws at
// once.
func TestTimeoutCancelAndOrphan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{OrphanGrace: 100 * time.Millisecond})
		defer h.Close()
		c := newFake("c")
		h.Join("tok", c, nil, Resume{})

		start := time.Now()
		_, ec := ask(h, "tok", "slow", 50*time.Millisecond, context.Background())
		if err := <-ec; !errors.Is(err, ErrTimeout) {
			t.Fatalf("err = %v, want ErrTimeout", err)
		}
		if waited := time.Since(start); waited != 50*time.Millisecond {
			t.Errorf("timed out after %v, want the 50ms deadline", waited)
		}
		synctest.Wait()
		if n := c.waitFor(t, NoteClosed); n.Request.ID != "slow" || n.Reason != "timeout" || n.Request.Kind != wire.AskQuestion {
			t.Errorf("cancel notification = %v", n)
		}

		// The caller going away (a dropped connection looks the same) leaves
		// the request pending, orphaned, for the grace period.
		ctx, cancel := context.WithCancel(context.Background())
		_, ec = ask(h, "tok", "gone", time.Minute, ctx)
		synctest.Wait()
		if !h.Validity("tok", []string{"gone"})["gone"] {
			t.Fatal("not pending once asked")
		}
		cancel()
		if err := <-ec; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		time.Sleep(100*time.Millisecond - time.Nanosecond)
		synctest.Wait()
		if v := h.Validity("tok", []string{"gone"}); !v["gone"] {
			t.Fatal("withdrawn within the grace; it should wait for its agent to come back")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if h.Validity("tok", []string{"gone"})["gone"] {
			t.Fatal("orphan not withdrawn at the end of the grace")
		}
		time.Sleep(settledNoteDelay) // the note that it was withdrawn
		synctest.Wait()
		if reason := cancelReason(c, "gone"); reason != "abandoned" {
			t.Errorf("orphan withdrawn with reason %q", reason)
		}

		// An explicit cancel withdraws at once.
		_, ec = ask(h, "tok", "cancel-me", time.Minute, context.Background())
		synctest.Wait()
		if err := h.Cancel(context.Background(), "other", "cancel-me"); !errors.Is(err, ErrNotPending) {
			t.Errorf("cancel from another token: %v", err)
		}
		if err := h.Cancel(context.Background(), "tok", "cancel-me"); err != nil {
			t.Fatal(err)
		}
		if err := <-ec; !errors.Is(err, ErrWithdrawn) {
			t.Fatalf("err = %v, want ErrWithdrawn", err)
		}
	})
}

func TestPendingBeforeLogin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{})
		defer h.Close()
		rc, _ := ask(h, "tok", "early", time.Minute, t.Context())
		synctest.Wait()
		ps := pendingOf(h, "tok")
		if len(ps) != 1 || ps[0].Request.ID != "early" || ps[0].Request.Timeout != time.Minute {
			t.Fatalf("pending = %v", ps)
		}
		if len(pendingOf(h, "other")) != 0 {
			t.Fatal("pending leaked to another token")
		}
		h.Join("tok", newFake("late"), nil, Resume{})
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "early", Reply{ClientID: "late"}); err != nil {
			t.Fatal(err)
		}
		if r := <-rc; r.ClientID != "late" {
			t.Fatalf("reply from %q", r.ClientID)
		}
	})
}

func TestReattach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{})
		defer h.Close()
		ctx, cancel := context.WithCancel(context.Background())
		_, ec := ask(h, "tok", "r1", time.Minute, ctx)
		synctest.Wait()
		cancel() // the agent's connection dropped
		<-ec
		// It asks again with the same ID: re-attached, not asked twice.
		rc, ec2 := ask(h, "tok", "r1", time.Minute, context.Background())
		synctest.Wait()
		if ps := pendingOf(h, "tok"); len(ps) != 1 {
			t.Fatalf("pending = %v", ps)
		}
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "r1", Reply{ClientID: "phone"}); err != nil {
			t.Fatal(err)
		}
		if r := <-rc; r.ClientID != "phone" || <-ec2 != nil {
			t.Fatalf("re-attached call got %+v", r)
		}
		// Answered while the agent was away: asking again hands the answer over.
		r, err := h.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "r1", Text: "q?", Timeout: time.Minute})
		if err != nil || r.ClientID != "phone" {
			t.Fatalf("after the answer: %+v %v", r, err)
		}
		// A pending ID asked as the other kind is refused.
		_, _ = ask(h, "tok", "r2", time.Minute, context.Background())
		synctest.Wait()
		if _, err := h.Ask(context.Background(), "tok", Request{Kind: wire.TaskFinish, ID: "r2", Text: "q?", Timeout: time.Minute}); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("the same ID as another kind: %v", err)
		}
	})
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{})
		c := newFake("c")
		h.Join("tok", c, nil, Resume{})
		_, ec := ask(h, "tok", "r", time.Minute, context.Background())
		c.waitFor(t, NoteAsked)
		h.Close()
		h.Close()
		if err := <-ec; !errors.Is(err, ErrClosed) {
			t.Fatalf("err = %v, want ErrClosed", err)
		}
		if got := c.cmds(); len(got) != 1 {
			t.Errorf("clients told %v on shutdown, want nothing", got)
		}
	})
}
