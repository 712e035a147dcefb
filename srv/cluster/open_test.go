package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// syncBuffer is a log's text, written by several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestOpenTogetherOnANewCluster: the instances of a deployment start at
// once on a NATS cluster that has no buckets yet, each making them.
// JetStream leaves a stream's update unanswered while another client's
// create of it is in flight, and that create too: an instance that
// asked to create-or-update waited out its try for every bucket, and
// with several buckets ran past its start's bound. Each makes them
// without a try left unanswered (a bucket just placed may not serve a
// read for a moment: that try is refused at once, and made again).
func TestOpenTogetherOnANewCluster(t *testing.T) {
	ns := natstest.StartCluster(t, 3)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b", "c"} {
		wg.Go(func() {
			c, err := Open(context.Background(), Options{URL: ns.URLs(), Tokens: []string{tok}, Instance: name, Logger: log.With("instance", name)})
			if err != nil {
				t.Errorf("open %s: %v", name, err)
				return
			}
			defer c.Close()
			if c.o.Replicas != 3 {
				t.Errorf("replicas = %d", c.o.Replicas)
			}
		})
	}
	wg.Wait()
	if strings.Contains(logs.String(), context.DeadlineExceeded.Error()) {
		t.Errorf("a try to make a bucket was left unanswered:\n%s", logs.String())
	}
}

// TestOpenUpdatesAnOlderBucket: a bucket an older release made with
// other settings is brought to this release's when it is opened.
func TestOpenUpdatesAnOlderBucket(t *testing.T) {
	ns := natstest.Start(t)
	in := start(t, ns.URL(), "a")
	old := jetstream.KeyValueConfig{Bucket: "TEST_OLD", History: 1, TTL: time.Hour}
	if _, err := in.c.js.CreateKeyValue(t.Context(), old); err != nil {
		t.Fatal(err)
	}
	cfg := old
	cfg.TTL = 2 * time.Hour
	kv, err := in.c.openKV(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != cfg.TTL {
		t.Errorf("TTL = %s, want %s", st.TTL(), cfg.TTL)
	}
	again, err := in.c.openKV(t.Context(), cfg)
	if err != nil || again.Bucket() != cfg.Bucket {
		t.Errorf("opened again: %v, %v", again, err)
	}
}

// awayAtFirst is a bucket just made on a NATS cluster: its stream has
// no leader to answer its status yet, nor to make a watch, for the
// first tries of each.
type awayAtFirst struct {
	jetstream.KeyValue
	mu                sync.Mutex
	statuses, watches int // tries left to refuse
	tries             int
}

func (kv *awayAtFirst) away(left *int) bool {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	kv.tries++
	*left--
	return *left >= 0
}

func (kv *awayAtFirst) Status(ctx context.Context) (jetstream.KeyValueStatus, error) {
	if kv.away(&kv.statuses) {
		return nil, nats.ErrNoResponders
	}
	return kv.KeyValue.Status(ctx)
}

func (kv *awayAtFirst) WatchAll(ctx context.Context, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	if kv.away(&kv.watches) {
		return nil, nats.ErrNoResponders
	}
	return kv.KeyValue.WatchAll(ctx, opts...)
}

// TestStartWhileBucketNotServed: what an instance reads at start right
// after opening the requests bucket (its epoch, its last revision, the
// watch of its records) finds no one answering for a moment. It reads
// again, rather than stop with "no responders", and follows the bucket.
func TestStartWhileBucketNotServed(t *testing.T) {
	ns := natstest.Start(t)
	in := start(t, ns.URL(), "a")
	c, err := Open(t.Context(), Options{URL: ns.URL(), Tokens: []string{tok}, Instance: "b"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	kv := &awayAtFirst{KeyValue: c.reqs, statuses: 2, watches: 2}
	c.reqs = kv
	if err := c.readEpoch(t.Context()); err != nil {
		t.Fatalf("epoch: %v", err)
	}
	if c.epoch != in.c.epoch {
		t.Errorf("epoch %q, the other instance's %q", c.epoch, in.c.epoch)
	}
	h := hub.New(hub.Options{Shared: c, Instance: "b"})
	t.Cleanup(h.Close)
	if err := c.Start(h, func() int { return 0 }); err != nil {
		t.Fatalf("start: %v", err)
	}
	<-c.Ready()
	kv.mu.Lock()
	if kv.statuses >= 0 || kv.watches >= 0 { // each read past its refusals
		t.Errorf("%d statuses and %d watches refused, of %d tries", 2-kv.statuses, 2-kv.watches, kv.tries)
	}
	kv.mu.Unlock()
	// It follows the bucket: a question asked on the other instance
	// reaches a device here.
	d := newClient("dev")
	h.Join(tok, d, nil, hub.Resume{})
	go func() { _, _ = in.hub.Ask(context.Background(), tok, question("q1", "Ready?")) }()
	d.expect(t, "AskQuestion")
}

// TestOpenNamesTheBucket: a bucket NATS refuses is named in the error,
// with its replicas, whichever of the cluster's buckets it is.
func TestOpenNamesTheBucket(t *testing.T) {
	ns := natstest.Start(t)
	in := start(t, ns.URL(), "a")
	_, err := in.c.openKV(t.Context(), jetstream.KeyValueConfig{Bucket: "TEST BAD"})
	if err == nil || !strings.Contains(err.Error(), "open bucket TEST BAD (") {
		t.Fatalf("openKV = %v, want an error naming the bucket", err)
	}
}
