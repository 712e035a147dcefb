package cluster

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/nats-io/nats.go/jetstream"
)

// fakeKV is a bucket whose watchers the test feeds; hook, when set, runs
// inside WatchAll (its call number n, from 1), before it returns.
type fakeKV struct {
	jetstream.KeyValue
	mu       sync.Mutex
	watchers []*fakeWatcher
	hook     func(n int)
}

type fakeWatcher struct{ ch chan jetstream.KeyValueEntry }

func (w *fakeWatcher) Updates() <-chan jetstream.KeyValueEntry { return w.ch }
func (w *fakeWatcher) Stop() error                             { return nil }

type fakeEntry struct {
	jetstream.KeyValueEntry
	rev uint64
}

func (e fakeEntry) Revision() uint64 { return e.rev }

func (kv *fakeKV) Bucket() string { return "test" }

func (kv *fakeKV) WatchAll(ctx context.Context, _ ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	kv.mu.Lock()
	w := &fakeWatcher{ch: make(chan jetstream.KeyValueEntry)}
	kv.watchers = append(kv.watchers, w)
	n, hook := len(kv.watchers), kv.hook
	kv.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	return w, nil
}

func (kv *fakeKV) calls() int {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	return len(kv.watchers)
}

func newFakeCluster() *Cluster {
	return &Cluster{log: slog.New(slog.DiscardHandler), back: make(chan struct{})}
}

// TestRewatchReconnectWhileDelivering: NATS comes back while the rewatch
// waits for its reader to take an entry (a slow follower). The watch is
// made again all the same, once the entry is taken.
func TestRewatchReconnectWhileDelivering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, kv := newFakeCluster(), &fakeKV{}
		rw, err := c.watchAll(t.Context(), kv)
		if err != nil {
			t.Fatal(err)
		}
		defer rw.Stop()
		kv.watchers[0].ch <- fakeEntry{rev: 1} // read; now waiting for the reader
		synctest.Wait()
		c.onReconnect()
		synctest.Wait()
		if e := <-rw.Updates(); e.Revision() != 1 {
			t.Fatalf("entry %d, want 1", e.Revision())
		}
		synctest.Wait()
		if n := kv.calls(); n != 2 {
			t.Fatalf("%d watches made, want 2: the reconnect while an entry waited for its reader was missed", n)
		}
	})
}

// TestRewatchReconnectWhileRenewing: NATS comes back (again) while the
// rewatch is making its watcher again after a reconnect: it makes it once
// more, since the one it just made may predate the latest reconnect.
func TestRewatchReconnectWhileRenewing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, kv := newFakeCluster(), &fakeKV{}
		kv.hook = func(n int) {
			if n == 2 {
				c.onReconnect()
			}
		}
		rw, err := c.watchAll(t.Context(), kv)
		if err != nil {
			t.Fatal(err)
		}
		defer rw.Stop()
		synctest.Wait()
		c.onReconnect()
		synctest.Wait()
		if n := kv.calls(); n != 3 {
			t.Fatalf("%d watches made, want 3: the reconnect during the renewal was missed", n)
		}
		// The entries go on from the latest watcher.
		kv.mu.Lock()
		w := kv.watchers[2]
		kv.mu.Unlock()
		w.ch <- fakeEntry{rev: 7}
		if e := <-rw.Updates(); e.Revision() != 7 {
			t.Fatalf("entry %d, want 7", e.Revision())
		}
	})
}

// TestLagBehind: a watch is stalled once it has delivered nothing over
// two probes while the stream held more than it had; one that moves, or
// has caught up, or a stream with nothing in it, is not.
func TestLagBehind(t *testing.T) {
	type probe struct{ delivered, last, msgs uint64 }
	for _, tc := range []struct {
		name   string
		probes []probe
		want   []bool
	}{
		{"caught up", []probe{{5, 5, 5}, {5, 5, 5}, {5, 5, 5}, {5, 5, 5}}, []bool{false, false, false, false}},
		{"stalled", []probe{{5, 5, 5}, {5, 7, 7}, {5, 7, 7}, {5, 7, 7}}, []bool{false, false, false, true}},
		{"slow but moving", []probe{{5, 9, 9}, {6, 12, 12}, {7, 15, 15}, {8, 18, 18}}, []bool{false, false, false, false}},
		{"caught up with the previous probe's", []probe{{5, 9, 9}, {9, 12, 12}, {12, 15, 15}}, []bool{false, false, false}},
		{"everything expired", []probe{{0, 9, 0}, {0, 9, 0}, {0, 9, 0}, {0, 9, 0}}, []bool{false, false, false, false}},
		{"stalled, told once, then again", []probe{{1, 3, 3}, {1, 3, 3}, {1, 3, 3}, {1, 3, 3}, {1, 3, 3}}, []bool{false, false, true, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l lag
			for i, p := range tc.probes {
				if got := l.behind(p.delivered, p.last, p.msgs); got != tc.want[i] {
					t.Errorf("probe %d %+v: behind = %v, want %v", i, p, got, tc.want[i])
				}
			}
		})
	}
}
