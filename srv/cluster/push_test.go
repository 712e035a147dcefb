package cluster

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/push"
	"github.com/agentassistant/agentassistant/srv/store"
)

func openPush(t *testing.T, in *instance) *push.Options {
	t.Helper()
	p := openPushOf(t, in)
	caps, err := answercap.NewShared(p.CapKey, p, p.Token)
	if err != nil {
		t.Fatal(err)
	}
	return &push.Options{Keys: p.Keys, Subscriptions: p.Subscriptions(), Caps: caps, Closes: p}
}

// TestPushIsShared: in cluster mode the instances push with the same
// VAPID keys, see every device's subscription whichever instance took
// it, and a notification's capability made by one instance answers
// through another, once; no token is kept in NATS for it.
func TestPushIsShared(t *testing.T) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	pa, pb := openPush(t, a), openPush(t, b)
	if pa.Keys != pb.Keys || pa.Keys.Public == "" {
		t.Fatalf("keys differ: %+v, %+v", pa.Keys.Public, pb.Keys.Public)
	}

	room := store.Room(tok)
	phone := push.Subscription{ID: "s1", Endpoint: "https://push.example/1", P256dh: "k", Auth: "a", Device: "Pixel 8 · Chrome"}
	if err := pa.Subscriptions.Put(room, phone); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B sees the subscription A took", func() bool {
		l, _ := pb.Subscriptions.List(room)
		return len(l) == 1 && l[0].Device == "Pixel 8 · Chrome"
	})
	laptop := push.Subscription{ID: "s2", Endpoint: "https://push.example/2", P256dh: "k2", Auth: "a2", Device: "Laptop"}
	if err := pb.Subscriptions.Put(room, laptop); err != nil {
		t.Fatal(err)
	}
	eventually(t, "A sees both", func() bool {
		l, _ := pa.Subscriptions.List(room)
		return len(l) == 2
	})
	if gone, err := pb.Subscriptions.Remove(room, push.ByID("s1")); err != nil || !gone {
		t.Fatalf("Remove = %v, %v", gone, err)
	}
	if gone, _ := pa.Subscriptions.Remove(room, push.ByID("nope")); gone {
		t.Error("removed a subscription that was never there")
	}
	eventually(t, "A sees the removal", func() bool {
		l, _ := pa.Subscriptions.List(room)
		return len(l) == 1 && l[0].ID == "s2"
	})

	// A question asked through B, its capability made there, answered
	// through A.
	answered := ask(context.Background(), b, question("q-1", "Deploy?"))
	now := time.Now()
	c := answercap.Cap{Room: room, Kind: wire.AskQuestion, ID: "q-1", Who: "Laptop", WhoID: "s2", Door: "push", Expires: now.Add(time.Hour)}
	name := pb.Caps.Make(tok, c, now)
	eventually(t, "A has the question", func() bool { m, _ := a.hub.PendingMessages(tok); return len(m) == 1 })
	if _, err := pa.Caps.Use(context.Background(), a.hub, name, "Yes", now); err != nil {
		t.Fatalf("the capability through A: %v", err)
	}
	if r := wait(t, answered); r.err != nil || text(r.rep) != "Yes" || r.rep.Nickname != "Laptop" {
		t.Fatalf("the agent got %+v, %v", r.rep, r.err)
	}
	if _, err := pb.Caps.Use(context.Background(), b.hub, name, "No", now); !errors.Is(err, answercap.ErrVoid) {
		t.Errorf("the capability again, through B: %v", err)
	}

	// Nothing kept in NATS names the token.
	for _, bucket := range []string{PushBucket, ClaimsBucket} {
		kv, err := a.c.js.KeyValue(context.Background(), bucket)
		if err != nil {
			t.Fatal(err)
		}
		keys, _ := kv.Keys(context.Background())
		for _, k := range keys {
			e, err := kv.Get(context.Background(), k)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains([]byte(k), []byte(tok)) || bytes.Contains(e.Value(), []byte(tok)) {
				t.Errorf("%s/%s holds the token", bucket, k)
			}
		}
		if bucket == PushBucket && !slices.Contains(keys, "vapid") {
			t.Errorf("%s keys: %v", bucket, keys)
		}
	}
}

// TestPushSubscriptionBoundAcrossInstances: a token's bound on devices
// subscribed to push (push.MaxSubscriptionsPerToken) holds across the
// cluster. Each instance checked it against the subscriptions it had
// heard of and kept the new one apart, so subscriptions made at once
// through several instances all saw room and were all kept. The shared
// store's Put now looks at the bound and keeps the new one in one
// compare-and-set of the room's key: a burst through two instances'
// stores keeps exactly the bound, the rest refused, and a kept endpoint
// may still subscribe again. Through the instances' Pushers, the same
// burst is 201 for the bound and 409 for the rest.
func TestPushSubscriptionBoundAcrossInstances(t *testing.T) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	pa, pb := openPush(t, a), openPush(t, b)
	const bound = push.MaxSubscriptionsPerToken

	room := store.Room(tok)
	const n = 100 // through each instance
	kept := make([][]string, 2)
	var wg sync.WaitGroup
	for j, p := range []*push.Options{pa, pb} {
		// One writer per instance, as its Pusher takes one at a time.
		wg.Go(func() {
			for i := range n {
				sub := push.Subscription{ID: fmt.Sprint(j, "-", i), Endpoint: fmt.Sprintf("https://push.example/%d/%d", j, i), P256dh: "k", Auth: "a"}
				err := p.Subscriptions.Put(room, sub)
				switch {
				case err == nil:
					kept[j] = append(kept[j], sub.ID)
				case !errors.Is(err, push.ErrTooManySubscriptions):
					t.Errorf("Put %s: %v", sub.ID, err)
				}
			}
		})
	}
	wg.Wait()
	if got := len(kept[0]) + len(kept[1]); got != bound {
		t.Fatalf("a burst through two instances kept %d (%d through A, %d through B), want %d", got, len(kept[0]), len(kept[1]), bound)
	}
	stored := func() []push.Subscription {
		t.Helper()
		e, err := a.c.js.KeyValue(context.Background(), PushBucket)
		if err != nil {
			t.Fatal(err)
		}
		v, err := e.Get(context.Background(), subsPrefix+room)
		if err != nil {
			t.Fatal(err)
		}
		var subs []push.Subscription
		if err := json.Unmarshal(v.Value(), &subs); err != nil {
			t.Fatal(err)
		}
		return subs
	}
	if got := len(stored()); got != bound {
		t.Fatalf("%d subscriptions stored, want %d", got, bound)
	}
	// A kept endpoint subscribing again replaces its own, past the bound.
	first := stored()[0]
	first.Device = "renamed"
	if err := pb.Subscriptions.Put(room, first); err != nil {
		t.Fatalf("a kept endpoint again: %v", err)
	}
	if got := stored(); len(got) != bound || !slices.ContainsFunc(got, func(s push.Subscription) bool { return s.Device == "renamed" }) {
		t.Fatalf("after a kept endpoint again: %d stored", len(got))
	}

	// Through the Pushers' handler, from a room with none.
	for _, s := range stored() {
		if _, err := pa.Subscriptions.Remove(room, push.ByID(s.ID)); err != nil {
			t.Fatal(err)
		}
	}
	handlers := []http.Handler{pusher(t, a, pa).Subscribe(tok), pusher(t, b, pb).Subscribe(tok)}
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{"p256dh": base64.RawURLEncoding.EncodeToString(key.PublicKey().Bytes()),
		"auth": base64.RawURLEncoding.EncodeToString(make([]byte, 16))}
	codes := make([]int, 2*n)
	for i := range codes {
		wg.Go(func() {
			body, _ := json.Marshal(map[string]any{"endpoint": fmt.Sprintf("https://push.example/dev/%d", i), "keys": keys, "device": fmt.Sprint("tab ", i)})
			rec := httptest.NewRecorder()
			handlers[i%2].ServeHTTP(rec, httptest.NewRequest("POST", "/push/subscriptions", bytes.NewReader(body)))
			codes[i] = rec.Code
			if rec.Code != http.StatusCreated && (rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "turn push off on one first")) {
				t.Errorf("subscription %d: %d %s", i, rec.Code, rec.Body)
			}
		})
	}
	wg.Wait()
	created := 0
	for _, c := range codes {
		if c == http.StatusCreated {
			created++
		}
	}
	if got := len(stored()); created != bound || got != bound {
		t.Fatalf("a burst through two instances' Pushers: %d created, %d stored, want %d", created, got, bound)
	}
}

// pusher is in's Pusher over o.
func pusher(t *testing.T, in *instance, o *push.Options) *push.Pusher {
	t.Helper()
	o.Hub, o.AllowPrivateEndpoints = in.hub, true
	p := push.New(*o)
	t.Cleanup(p.Close)
	return p
}

// notServedYet is a bucket just made on a NATS cluster: for its first
// reads no replica answers yet.
type notServedYet struct {
	jetstream.KeyValue
	mu    sync.Mutex
	left  int
	reads int
}

func (kv *notServedYet) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	kv.mu.Lock()
	kv.reads++
	away := kv.left > 0
	kv.left--
	kv.mu.Unlock()
	if away {
		return nil, nats.ErrNoResponders
	}
	return kv.KeyValue.Get(ctx, key)
}

// TestPushKeysWhileBucketNotServed: an instance started with its NATS
// cluster just formed finds no replica answering the push bucket's first
// reads. It tries again, rather than stop with "no responders", and the
// keys it makes are the ones it then reads.
func TestPushKeysWhileBucketNotServed(t *testing.T) {
	ns := natstest.Start(t)
	in := start(t, ns.URL(), "a")
	real, err := in.c.openKV(t.Context(), jetstream.KeyValueConfig{Bucket: "TEST_ONCE"})
	if err != nil {
		t.Fatal(err)
	}
	kv := &notServedYet{KeyValue: real, left: 2}
	v, err := in.c.keepOnce(t.Context(), kv, "k", func() ([]byte, error) { return []byte("made"), nil })
	if err != nil {
		t.Fatalf("once: %v", err)
	}
	if string(v) != "made" || kv.reads < 3 {
		t.Fatalf("once = %q after %d reads", v, kv.reads)
	}
	again, err := in.c.keepOnce(t.Context(), kv, "k", func() ([]byte, error) { return []byte("other"), nil })
	if err != nil || string(again) != "made" {
		t.Fatalf("once again = %q, %v", again, err)
	}
}
