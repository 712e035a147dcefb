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
	"github.com/agentassistant/agentassistant/srv/push"
	"github.com/agentassistant/agentassistant/srv/store"
)

// pushPair is two instances, A and B, over one NATS, with Web Push to
// one device (subscription s1) whose push service is svc: the pushes it
// takes are opened and kept in order of arrival.
type pushPair struct {
	t      *testing.T
	ns     *natstest.Server
	a, b   *instance
	oa, ob *push.Options
	svc    *httptest.Server
	sub    push.Subscription

	mu   sync.Mutex
	got  []pushOpened
	wake chan struct{}
}

// newPushPair makes the pair. on, if not nil, is called with each push
// once it is kept, before the push service answers it (201); it may
// hold the answer back.
func newPushPair(t *testing.T, on func(r *http.Request, m pushOpened)) *pushPair {
	t.Helper()
	ns := natstest.Start(t)
	p := &pushPair{t: t, ns: ns, wake: make(chan struct{}, 100)}
	p.a, p.b = start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	p.oa, p.ob = openPush(t, p.a), openPush(t, p.b)
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	p.svc = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m := openPushBody(t, key, auth, body)
		p.mu.Lock()
		p.got = append(p.got, m)
		p.mu.Unlock()
		p.wake <- struct{}{}
		if on != nil {
			on(r, m)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(p.svc.Close)
	for _, o := range []*push.Options{p.oa, p.ob} {
		o.Client, o.AllowHTTP = p.svc.Client(), true
	}
	p.sub = push.Subscription{ID: "s1", Endpoint: p.svc.URL + "/phone", Device: "Pixel 8 · Chrome",
		P256dh: base64.RawURLEncoding.EncodeToString(key.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(auth)}
	return p
}

// subscribe keeps the device's subscription through A, and waits until
// both instances have it.
func (p *pushPair) subscribe() {
	p.t.Helper()
	if err := p.oa.Subscriptions.Put(store.Room(tok), p.sub); err != nil {
		p.t.Fatal(err)
	}
	eventually(p.t, "both see the subscription", func() bool {
		la, _ := p.oa.Subscriptions.List(store.Room(tok))
		lb, _ := p.ob.Subscriptions.List(store.Room(tok))
		return len(la) == 1 && len(lb) == 1
	})
}

// seen waits until the device got pushes that until says are all, given
// the asks of questions other than q and the closes of q; it returns
// every push got.
func (p *pushPair) seen(q string, until func(asks, closes int) bool) []pushOpened {
	p.t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		p.mu.Lock()
		asks, closes := 0, 0
		for _, m := range p.got {
			switch {
			case m.Type == "ask" && m.ID != q:
				asks++
			case m.Type == "settled" && m.ID == q:
				closes++
			}
		}
		seen := append([]pushOpened(nil), p.got...)
		p.mu.Unlock()
		if until(asks, closes) {
			return seen
		}
		select {
		case <-p.wake:
		case <-deadline:
			p.t.Fatalf("the device got %v: not what was awaited of %s", seen, q)
		}
	}
}

// pushedFrom waits until the push of question id to the device is
// through on record (the close of its settle is then decided at once).
func (p *pushPair) pushedFrom(o *push.Options, id string) {
	p.t.Helper()
	c := o.Closes.(*Push)
	key := closeKey(store.Room(tok), id, p.sub.ID)
	eventually(p.t, "the push of "+id+" through", func() bool {
		e, err := c.claims.Get(context.Background(), key)
		return err == nil && readClose(e.Value()).State == closePushed
	})
}

// closedOnce waits until the device got a close of q-1, then asks q-2
// through in (after every close of q-1 queued there), and fails unless
// the device got its ask of q-1, then one close of it.
func (p *pushPair) closedOnce(in *instance) {
	p.t.Helper()
	p.seen("q-1", func(_, closes int) bool { return closes > 0 })
	ask(context.Background(), in, question("q-2", "Ship?"))
	var closes int
	all := p.seen("q-1", func(asks, n int) bool { closes = n; return asks == 1 })
	if closes != 1 || all[0] != (pushOpened{"ask", "q-1"}) || all[1] != (pushOpened{"settled", "q-1"}) {
		p.t.Fatalf("the device got %v: %d closes of q-1, want one, after its ask", all, closes)
	}
}
