package hub

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// slowCreateBus is a bus whose creates wait until the test lets them
// through: a record being written for as long as NATS takes.
type slowCreateBus struct {
	*bus
	release chan struct{}
}

func (b *slowCreateBus) Create(ctx context.Context, rec SharedRecord) (uint64, error) {
	<-b.release
	return b.bus.Create(ctx, rec)
}

// TestWaitOnACreateEndsWithTheCaller: while a request's record is being
// written by one call, a second call with its ID waits for that write;
// it returns when its own context ends, and when the hub closes, not
// when the write is done. A cancel waiting on the same write returns
// once the hub closes, so Close does not wait for the write.
func TestWaitOnACreateEndsWithTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &slowCreateBus{bus: newBus(), release: make(chan struct{})}
		h := New(Options{Shared: b, Instance: "a"})
		defer close(b.release) // the first call's write lands: the bubble ends
		defer h.Close()
		req := Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "?", Timeout: time.Hour}
		go func() { _, _ = h.Ask(context.Background(), "tok", req) }()
		synctest.Wait() // its record is being written

		ctx, cancel := context.WithCancel(context.Background())
		second := make(chan error, 1)
		go func() {
			_, err := h.Ask(ctx, "tok", req)
			second <- err
		}()
		synctest.Wait()
		cancel()
		synctest.Wait()
		select {
		case err := <-second:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("the second call: %v, want its context's end", err)
			}
		default:
			t.Fatal("the second call waits on the write after its context ended")
		}

		third := make(chan error, 1)
		go func() {
			_, err := h.Ask(context.Background(), "tok", req)
			third <- err
		}()
		cancelled := make(chan error, 1)
		go func() { cancelled <- h.Cancel(context.Background(), "tok", "q") }()
		synctest.Wait()
		closed := make(chan struct{})
		go func() {
			h.Close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
		default:
			t.Fatal("Close waits on a record being written")
		}
		for name, ch := range map[string]chan error{"a call": third, "a cancel": cancelled} {
			select {
			case err := <-ch:
				if !errors.Is(err, ErrClosed) {
					t.Errorf("%s waiting on the write: %v, want ErrClosed", name, err)
				}
			default:
				t.Errorf("%s waits on the write after Close", name)
			}
		}
	})
}
