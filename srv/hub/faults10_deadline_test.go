package hub

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestFaults10DeadlineNotWithdrawnWhileUnsaved: an agent that can come
// back for its answer leaves (its instance lost NATS, say); the
// request's deadline passes while the store saves nothing (a NATS
// cluster without quorum), and so does the orphan grace. The timeout,
// tried again, is not replaced by a withdrawal: once the store is back
// the record says the request timed out, once.
func TestFaults10DeadlineNotWithdrawnWhileUnsaved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &downBus{bus: newBus()}
		h := New(Options{Shared: b, Instance: "a"})
		defer h.Close()
		n := &node{h: h}
		ctx, leave := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := h.Ask(ctx, "tok", Request{Kind: wire.AskQuestion, ID: "q", Text: "?", Timeout: time.Minute})
			done <- err
		}()
		synctest.Wait()
		b.deliver(n)
		leave()
		<-done
		b.down.Store(true)
		time.Sleep(time.Hour) // the deadline and the orphan grace pass
		synctest.Wait()
		b.down.Store(false)
		time.Sleep(retryMax)
		synctest.Wait()
		b.deliver(n)
		var outcomes []string
		for _, rec := range b.log {
			if rec.Status != store.Pending {
				outcomes = append(outcomes, string(rec.Status))
			}
		}
		if len(outcomes) != 1 || outcomes[0] != string(store.TimedOut) {
			t.Fatalf("outcomes written %v, want one timeout (%v)", outcomes, store.TimedOut)
		}
	})
}
