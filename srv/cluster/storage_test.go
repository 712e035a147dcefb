package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestOpenOnNATSShortOfStorage: NATS's JetStream has less file storage
// (max_file_store, or a nearly full disk under it) than a bucket
// reserves. The instance does not start, and says what is short and
// which setting gives it, rather than JetStream's bare error code.
func TestOpenOnNATSShortOfStorage(t *testing.T) {
	ns := natstest.StartStore(t, 8<<20)
	c, err := Open(context.Background(), Options{URL: ns.URL(), Tokens: []string{tok}, Instance: "a"})
	if err == nil {
		c.Close()
		t.Fatal("opened on a NATS with 8 MiB of storage")
	}
	for _, want := range []string{MCPNotesBucket, "64 MiB", "max_file_store"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
}

// TestSecondInstanceOnNATSWithRoomForOne: NATS's storage holds the
// buckets' reservations once, not twice. The second instance opens the
// buckets the first made, rather than being refused as if it reserved
// them again.
func TestSecondInstanceOnNATSWithRoomForOne(t *testing.T) {
	ns := natstest.StartStore(t, 100<<20)
	for _, name := range []string{"a", "b"} {
		c, err := Open(context.Background(), Options{URL: ns.URL(), Tokens: []string{tok}, Instance: name})
		if err != nil {
			t.Fatalf("instance %s: %v", name, err)
		}
		defer c.Close()
	}
}

// limitBucket sets bucket's own limit (the max bytes an operator gives
// it: nats stream edit KV_<bucket> --max-bytes) to what it holds now, or
// lifts it (0).
func limitBucket(t *testing.T, in *instance, bucket string, full bool) {
	t.Helper()
	ctx := context.Background()
	s, err := in.c.js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.Config
	cfg.MaxBytes = -1
	if full {
		cfg.MaxBytes = max(int64(info.State.Bytes), 1)
	}
	if _, err := in.c.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// TestBucketAtItsOwnLimit: the requests bucket reaches its own limit
// (its max bytes, not NATS's max_file_store). As with NATS out of
// storage, an ask is refused at once as not saved (ResourceExhausted to
// the agent, not tried again as if NATS were away), saying which bucket
// is full and what to raise; an answer is refused (not_saved) and its
// question stays pending; the store's probe fails (health 503). The
// limit raised, without a restart, the probe passes, the instance takes
// writes again, and the answer refused is taken.
func TestBucketAtItsOwnLimit(t *testing.T) {
	ns := natstest.Start(t)
	a := start(t, ns.URL(), "a")
	onA := newClient("pa")
	a.hub.Join(tok, onA, nil, hub.Resume{})
	done := ask(context.Background(), a, question("kept", "Pending through it?"))
	onA.expect(t, wire.CmdAskQuestion)

	limitBucket(t, a, RequestsBucket, true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := a.hub.Ask(ctx, tok, question("full", "Room for me?"))
	if !errors.Is(err, hub.ErrNotSaved) || errors.Is(err, hub.ErrUnreachable) {
		t.Fatalf("asked while the requests bucket is full: %v, want not saved", err)
	}
	for _, want := range []string{RequestsBucket, "max-bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if err := a.hub.Answer(ctx, tok, wire.AskQuestion, "kept", reply("pa", "Not now")); !errors.Is(err, hub.ErrNotSaved) {
		t.Fatalf("an answer while the requests bucket is full: %v, want not saved", err)
	}
	if !a.hub.Refusing() {
		t.Error("the hub does not say it refuses writes")
	}
	if err := a.c.Probe(ctx); err == nil {
		t.Error("the probe passes while the requests bucket is full: /health would say 200")
	}

	limitBucket(t, a, RequestsBucket, false)
	eventually(t, "the hub takes writes again", func() bool { return !a.hub.Refusing() })
	if err := a.hub.Answer(ctx, tok, wire.AskQuestion, "kept", reply("pa", "Now")); err != nil {
		t.Fatalf("the answer given again once the limit was raised: %v", err)
	}
	if r := wait(t, done); r.err != nil || text(r.rep) != "Now" {
		t.Fatalf("Ask = %+v, %v", r.rep, r.err)
	}
}
