package hub

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestWithdrawOnLeave: a request whose caller cannot take a missed answer
// (upstream's agentassistant-mcp) is withdrawn as soon as its call goes,
// alone or in cluster mode (by the holder); one whose caller can stays
// pending for the grace.
func TestWithdrawOnLeave(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		for _, leaving := range []bool{false, true} {
			t.Run(fmt.Sprintf("cluster=%v,leaving=%v", cluster, leaving), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					sh := &slowShared{land: make(chan struct{}), recs: map[string]SharedRecord{}, revs: map[string]uint64{}}
					close(sh.land)
					o := Options{OrphanGrace: time.Hour}
					if cluster {
						o.Shared, o.Instance = sh, "a"
					}
					h := New(o)
					defer h.Close()
					ctx, cancel := context.WithCancel(context.Background())
					done := make(chan error, 1)
					go func() {
						_, err := h.Ask(ctx, "tok", Request{Kind: wire.AskQuestion, ID: "q", Text: "Anyone?", Timeout: 2 * time.Hour, WithdrawOnLeave: leaving})
						done <- err
					}()
					synctest.Wait()
					cancel()
					<-done
					synctest.Wait()
					pending := h.Validity("tok", []string{"q"})["q"]
					if cluster {
						sh.mu.Lock()
						pending = sh.recs["q"].Status == store.Pending
						sh.mu.Unlock()
					}
					if pending == leaving {
						t.Errorf("pending %v after the call went", pending)
					}
				})
			})
		}
	}
}
