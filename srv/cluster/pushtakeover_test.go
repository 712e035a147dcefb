package cluster

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/push"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestCloseTakenOverFromADeadPusher: a question asked on A is answered
// on B while A pushes it, and A never finishes that push (killed: its
// push service never answers it). The close left owed to A is taken
// over by B: the device gets it, once.
func TestCloseTakenOverFromADeadPusher(t *testing.T) {
	takeOverRound(t, false)
}

// TestCloseTakenOverFromASlowPusher: as above, but A was only slow
// (stopped, then continued): its push goes through after B took its
// close over, and A, seeing that, pushes no second close.
func TestCloseTakenOverFromASlowPusher(t *testing.T) {
	takeOverRound(t, true)
}

func takeOverRound(t *testing.T, slow bool) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	oa, ob := openPush(t, a), openPush(t, b)

	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	var (
		mu     sync.Mutex
		got    []pushOpened
		wake   = make(chan struct{}, 100)
		closed = make(chan struct{}) // the device got a close of q-1
		once   sync.Once
	)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m := openPushBody(t, key, auth, body)
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
		wake <- struct{}{}
		switch {
		case m.Type == "ask" && m.ID == "q-1":
			// A pushes it: answered on B meanwhile, and A's push hangs
			// (dead), or returns once B's close is in (slow).
			if err := b.hub.Answer(context.Background(), tok, wire.AskQuestion, "q-1", reply("pc", "yes")); err != nil {
				t.Error(err)
			}
			if !slow {
				<-r.Context().Done()
				return
			}
			select {
			case <-closed:
			case <-r.Context().Done():
				return
			}
		case m.Type == "settled" && m.ID == "q-1":
			once.Do(func() { close(closed) })
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(svc.Close)
	oa.Client, ob.Client, oa.AllowHTTP, ob.AllowHTTP = svc.Client(), svc.Client(), true, true
	oa.TakeOver, ob.TakeOver = 50*time.Millisecond, 50*time.Millisecond
	pusher(t, a, oa)
	pusher(t, b, ob)
	sub := push.Subscription{ID: "s1", Endpoint: svc.URL + "/phone", Device: "Pixel 8 · Chrome",
		P256dh: base64.RawURLEncoding.EncodeToString(key.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(auth)}
	if err := oa.Subscriptions.Put(store.Room(tok), sub); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both see the subscription", func() bool {
		la, _ := oa.Subscriptions.List(store.Room(tok))
		lb, _ := ob.Subscriptions.List(store.Room(tok))
		return len(la) == 1 && len(lb) == 1
	})

	wait(t, ask(context.Background(), a, question("q-1", "Deploy?")))
	// seen waits until the device got pushes that until says are all.
	seen := func(until func(asks, closes int) bool) []pushOpened {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			mu.Lock()
			asks, closes := 0, 0
			for _, m := range got {
				switch {
				case m.Type == "ask" && m.ID != "q-1":
					asks++
				case m.Type == "settled" && m.ID == "q-1":
					closes++
				}
			}
			seen := append([]pushOpened(nil), got...)
			mu.Unlock()
			if until(asks, closes) {
				return seen
			}
			select {
			case <-wake:
			case <-deadline:
				t.Fatalf("the device got %v: no close of q-1 after its ask", seen)
			}
		}
	}
	seen(func(_, closes int) bool { return closes > 0 })
	// Asked once every close of q-1 is queued on the instances that
	// live: once they are pushed, every close of q-1 is in. On A, q-2
	// may be queued before A's push of q-1 is through: q-4 is not.
	want := 1
	if slow {
		ask(context.Background(), a, question("q-2", "Ship?"))
		seen(func(asks, _ int) bool { return asks == 1 })
		ask(context.Background(), a, question("q-4", "Tag?"))
		want = 3
	}
	ask(context.Background(), b, question("q-3", "Merge?"))
	var closes int
	all := seen(func(asks, n int) bool { closes = n; return asks == want })
	if closes != 1 || all[0] != (pushOpened{"ask", "q-1"}) || all[1] != (pushOpened{"settled", "q-1"}) {
		t.Fatalf("the device got %v: %d closes of q-1, want one, after its ask", all, closes)
	}
}
