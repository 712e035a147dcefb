package hub

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// fullShared refuses every write while full, as NATS out of storage
// does, its probe too.
type fullShared struct {
	slowShared
	full atomic.Bool
	// tight: writes pass, the probe's (room to grow) does not.
	tight atomic.Bool
}

var errNoRoom = errors.New("insufficient resources")

func (s *fullShared) Create(ctx context.Context, rec SharedRecord) (uint64, error) {
	if s.full.Load() {
		return 0, errNoRoom
	}
	return s.slowShared.Create(ctx, rec)
}

func (s *fullShared) Probe(context.Context) error {
	if s.full.Load() || s.tight.Load() {
		return errNoRoom
	}
	return nil
}

// fullHub is a hub over a fullShared that is full.
func fullHub() (*fullShared, *Hub) {
	land := make(chan struct{})
	close(land)
	sh := &fullShared{slowShared: slowShared{land: land, recs: map[string]SharedRecord{}, revs: map[string]uint64{}}}
	sh.full.Store(true)
	return sh, New(Options{Shared: sh, Instance: "a"})
}

// TestRefusingEndsWhenTheStoreTakesWritesAgain: a request the store
// refuses makes the hub say it refuses writes (/health: 503); once the
// store takes writes again the hub says so within a probe's period,
// with no write of anyone's to find it out.
func TestRefusingEndsWhenTheStoreTakesWritesAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh, h := fullHub()
		defer h.Close()
		if h.Refusing() {
			t.Fatal("refusing before any write")
		}
		if _, err := h.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "q", Text: "Room?", Timeout: time.Hour}); !errors.Is(err, ErrNotSaved) {
			t.Fatalf("asked on a full store: %v", err)
		}
		if !h.Refusing() {
			t.Fatal("a request refused, and the hub does not say the store refuses writes")
		}
		time.Sleep(5 * probeEvery)
		synctest.Wait()
		if !h.Refusing() {
			t.Fatal("the store still refuses writes, and the hub says it does not")
		}
		sh.full.Store(false)
		time.Sleep(probeEvery)
		synctest.Wait()
		if h.Refusing() {
			t.Fatal("the store takes writes again, and the hub still says it refuses them")
		}
	})
}

// TestRefusingEndsWithTheProbeAlone: past a refusal, a small write that
// still fits (a file's free pages) does not make the hub say the store
// takes writes: the next that needs room would be refused. The probe,
// which needs that room, ends it.
func TestRefusingEndsWithTheProbeAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sh, h := fullHub()
		defer h.Close()
		ask := func(id string) error {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			_, err := h.Ask(ctx, "tok", Request{Kind: wire.AskQuestion, ID: id, Text: "Room?", Timeout: time.Hour})
			return err
		}
		if err := ask("q-1"); !errors.Is(err, ErrNotSaved) {
			t.Fatalf("asked on a full store: %v", err)
		}
		sh.full.Store(false)
		sh.tight.Store(true)
		go ask("q-2") //nolint:errcheck // saved, then withdrawn by its cancel at the end
		synctest.Wait()
		if !h.Refusing() {
			t.Fatal("a small write passed, and the hub says the store takes writes while its probe cannot grow it")
		}
		sh.tight.Store(false)
		time.Sleep(probeEvery)
		synctest.Wait()
		if h.Refusing() {
			t.Fatal("the probe passes, and the hub still says the store refuses writes")
		}
	})
}
