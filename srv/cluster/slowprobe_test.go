package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestSlowNATSStaysHealthy: NATS that answers every request, but each
// after 2.5 to 3.5 s (a loaded server, a long link), saves every write within
// the hub's time for it (10 s): the instance stays healthy, and the
// agents' calls held there are not ended as unavailable. The same NATS
// answering after 5 s is one that cannot save in time: unhealthy. One
// request left without an answer (dropped by a NATS too busy) among
// quick ones is no reason either.
func TestSlowNATSStaysHealthy(t *testing.T) {
	for _, c := range []struct {
		rtt     time.Duration
		stuck   int64 // this round trip gets no answer (0: none)
		healthy bool
	}{{2500 * time.Millisecond, 0, true}, {3 * time.Second, 0, true}, {3500 * time.Millisecond, 0, true}, {5 * time.Second, 0, false},
		{10 * time.Millisecond, 3, true}} {
		t.Run(fmt.Sprint(c.rtt, "/", c.stuck), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cl := &Cluster{log: slog.New(slog.DiscardHandler)}
				db, err := store.Open(t.TempDir(), store.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = db.Close() }()
				h := hub.New(hub.Options{Store: db})
				defer h.Close()
				var trips atomic.Int64
				trip := func(ctx context.Context) (jetstream.StreamState, time.Time, error) {
					wait := time.After(c.rtt)
					if trips.Add(1) == c.stuck {
						wait = nil
					}
					select {
					case <-wait:
						return jetstream.StreamState{}, time.Now(), nil
					case <-ctx.Done():
						return jetstream.StreamState{}, time.Time{}, ctx.Err()
					}
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { defer close(done); cl.probe(ctx, h, &rewatch{}, trip) }()
				unhealthy := false
				for range 60 { // a minute of probes
					time.Sleep(time.Second)
					synctest.Wait()
					cl.mu.Lock()
					unhealthy = unhealthy || cl.health.lost || time.Since(cl.health.okAt) >= unhealthyAfter
					cl.mu.Unlock()
				}
				cancel()
				<-done
				if unhealthy == c.healthy {
					t.Errorf("NATS answering after %s: unhealthy %v, want %v", c.rtt, unhealthy, !c.healthy)
				}
			})
		})
	}
}
