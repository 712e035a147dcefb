package channel

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// gatedNotes are outageNotes whose next write, once armed, waits for
// release: a write in flight.
type gatedNotes struct {
	*outageNotes
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedNotes) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.entered, g.release = true, make(chan struct{}), make(chan struct{})
}

func (g *gatedNotes) Put(ctx context.Context, key string, value []byte, until time.Time) error {
	g.mu.Lock()
	armed, entered, release := g.armed, g.entered, g.release
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(entered)
		<-release
	}
	return g.outageNotes.Put(ctx, key, value, until)
}

// startLater runs l's writer until the test's bubble ends it.
func startLater(t *testing.T, store Notes) *laterNotes {
	l := newLaterNotes(store, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { // owned by the test: ended and waited for at its end
		defer close(done)
		l.run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

func written(t *testing.T, o *outageNotes, key string) string {
	t.Helper()
	v, ok, err := o.written.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return "(none)"
	}
	return string(v)
}

// TestLaterNotesWrittenOnceBack: a note the store refuses is kept, read
// here meanwhile, tried again with backoff, and written once the store
// answers: the newest write of its key, a delete included; one whose
// question expired meanwhile is not written.
func TestLaterNotesWrittenOnceBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newOutageNotes()
		l := startLater(t, store)
		ctx := t.Context()
		until := time.Now().Add(time.Hour)
		if err := store.written.Put(ctx, "settled", []byte("asked"), until); err != nil {
			t.Fatal(err)
		}
		store.down.Store(true)

		if err := l.Put(ctx, "q", []byte("v1"), until); err != nil {
			t.Fatalf("a note the store refuses: %v", err)
		}
		if v, ok, err := l.Get(ctx, "q"); string(v) != "v1" || !ok || err != nil {
			t.Errorf("read here meanwhile: %q %v %v", v, ok, err)
		}
		if err := l.Put(ctx, "q", []byte("v2"), until); err != nil {
			t.Fatal(err)
		}
		if err := l.Delete(ctx, "settled"); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := l.Get(ctx, "settled"); ok {
			t.Error("a note deleted is read here still")
		}
		if err := l.Put(ctx, "expires", []byte("v"), time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}

		// Tried again with backoff: a handful of tries a minute, not
		// one a millisecond.
		refused := store.refused.Load()
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := store.refused.Load() - refused; n < 20 || n > 60 {
			t.Errorf("%d tries in a minute of outage", n)
		}
		if got := written(t, store, "q"); got != "(none)" {
			t.Fatalf("written while the store refuses: %q", got)
		}

		store.down.Store(false)
		time.Sleep(laterMaxRetry)
		synctest.Wait()
		if got := written(t, store, "q"); got != "v2" {
			t.Errorf("written once back: %q, not the newest", got)
		}
		if got := written(t, store, "settled"); got != "(none)" {
			t.Errorf("a delete kept was not made: %q", got)
		}
		if got := written(t, store, "expires"); got != "(none)" {
			t.Errorf("a note past its time was written: %q", got)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.keys) != 0 || l.bytes != 0 {
			t.Errorf("still kept: %d notes, %d bytes", len(l.keys), l.bytes)
		}
	})
}

// TestLaterNotesInOrder: a write made while an earlier one of the same
// key is in flight is written after it, never overtaken by it.
func TestLaterNotesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &gatedNotes{outageNotes: newOutageNotes()}
		l := startLater(t, store)
		ctx := t.Context()
		until := time.Now().Add(time.Hour)
		store.down.Store(true)
		if err := l.Put(ctx, "q", []byte("asked"), until); err != nil {
			t.Fatal(err)
		}
		store.down.Store(false)
		store.arm()
		time.Sleep(laterRetry) // the writer's next try: "asked", held in flight
		<-store.entered
		if err := l.Put(ctx, "q", []byte("gone"), until); err != nil {
			t.Fatal(err)
		}
		close(store.release)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := written(t, store.outageNotes, "q"); got != "gone" {
			t.Errorf("written last: %q", got)
		}
	})
}

// TestLaterNotesBounded: past maxLaterNotes a write the store refuses
// is told to its caller, not kept; putNow never keeps.
func TestLaterNotesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newOutageNotes()
		l := startLater(t, store)
		ctx := t.Context()
		until := time.Now().Add(time.Hour)
		store.down.Store(true)
		if err := putNow(ctx, l, "mail", "v", until); !errors.Is(err, errNoQuorum) {
			t.Errorf("putNow while the store refuses: %v", err)
		}
		for i := range maxLaterNotes {
			if err := l.Put(ctx, strconv.Itoa(i), []byte("v"), until); err != nil {
				t.Fatalf("note %d: %v", i, err)
			}
		}
		if err := l.Put(ctx, "one more", []byte("v"), until); !errors.Is(err, errNoQuorum) {
			t.Errorf("a note past the bound: %v", err)
		}
		if _, ok, _ := l.Get(ctx, "mail"); ok {
			t.Error("putNow's note was kept")
		}
	})
}
