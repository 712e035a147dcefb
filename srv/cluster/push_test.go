package cluster

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/push"
	"github.com/agentassistant/agentassistant/srv/store"
)

func openPush(t *testing.T, in *instance) *push.Options {
	t.Helper()
	p, err := in.c.OpenPush(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	caps, err := answercap.NewShared(p.CapKey, p, p.Token)
	if err != nil {
		t.Fatal(err)
	}
	return &push.Options{Keys: p.Keys, Subscriptions: p.Subscriptions(), Caps: caps}
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
	if gone, err := pb.Subscriptions.Remove(room, "s1"); err != nil || !gone {
		t.Fatalf("Remove = %v, %v", gone, err)
	}
	if gone, _ := pa.Subscriptions.Remove(room, "nope"); gone {
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
