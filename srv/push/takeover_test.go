package push

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// leftClose is a cluster's Closes where every close is left to another
// instance pushing its question, which pushes it (pushed) or not.
type leftClose struct {
	mu     sync.Mutex
	pushed bool // the pusher pushed the close
	taken  int  // the closes taken over
}

func (*leftClose) Pushing(context.Context, string, string, string) (bool, error) { return true, nil }
func (*leftClose) Pushed(context.Context, string, string, string) (bool, error)  { return false, nil }
func (*leftClose) Closing(context.Context, string, string, string) (bool, error) { return false, nil }
func (*leftClose) Closed(context.Context, string, string, string) error          { return nil }
func (*leftClose) Left(context.Context, time.Duration) ([]Left, error)           { return nil, nil }
func (*leftClose) Adopt(context.Context, Left, time.Duration) (bool, error) {
	return false, nil
}
func (c *leftClose) TakeOver(context.Context, string, string, string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pushed {
		return false, nil
	}
	c.taken++
	return true, nil
}

// roundTrip is a push service on no network: it takes every push (201).
type roundTrip func(*http.Request)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) {
	f(r)
	return &http.Response{StatusCode: http.StatusCreated, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
}

// TestCloseTakenOverAfterItsDelay: a close left to the instance pushing
// its question is pushed from here once TakeOver has passed and that
// instance has not pushed it; not before, and not when it has.
func TestCloseTakenOverAfterItsDelay(t *testing.T) {
	for _, pushed := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			dir := t.TempDir()
			keys, subs := keysAndSubs(t, dir)
			d := newDevice(t, "/phone")
			if err := subs.Put(store.Room(tokA), Subscription{ID: "s1", Endpoint: "https://push.example/phone",
				P256dh: base64.RawURLEncoding.EncodeToString(d.key.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(d.auth)}); err != nil {
				t.Fatal(err)
			}
			var (
				mu     sync.Mutex
				closes int
			)
			svc := roundTrip(func(r *http.Request) {
				if r.Header.Get("TTL") == "3600" {
					mu.Lock()
					closes++
					mu.Unlock()
				}
			})
			h := hub.New(hub.Options{})
			defer h.Close()
			cl := &leftClose{pushed: pushed}
			p := New(Options{Hub: h, Subscriptions: subs, Keys: keys, Client: &http.Client{Transport: svc},
				Closes: cl, TakeOver: time.Minute})
			defer p.Close()
			go func() {
				_, _ = h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?", Timeout: 2 * time.Hour}) // its TTL is no close's
			}()
			synctest.Wait()
			if err := h.Answer(context.Background(), tokA, wire.AskQuestion, "q-1", hub.Reply{ClientID: "pc", Nickname: "PC"}); err != nil {
				t.Fatal(err)
			}
			count := func() int { synctest.Wait(); mu.Lock(); defer mu.Unlock(); return closes }
			time.Sleep(time.Minute - time.Second)
			if n := count(); n != 0 {
				t.Fatalf("%d closes pushed before the pusher's time was up", n)
			}
			time.Sleep(time.Second)
			want := 1
			if pushed {
				want = 0
			}
			if n := count(); n != want || cl.taken != want {
				t.Fatalf("pusher pushed it: %v; %d closes pushed, %d taken over, want %d", pushed, n, cl.taken, want)
			}
		})
	}
}

// TestCloseSentWholeIsNotTriedAgain: a close the push service took whole
// and did not answer in time (or whose instance was stopped as it
// waited: SIGSTOP) is taken as pushed, not sent again: a second would
// close nothing on the device and count as a silent push. An ask is
// tried again as before.
func TestCloseSentWholeIsNotTriedAgain(t *testing.T) {
	dir := t.TempDir()
	keys, subs := keysAndSubs(t, dir)
	var (
		mu            sync.Mutex
		asks, closes  int
		askTries      int
		got           = make(chan struct{}, 100)
		closeArrived  = make(chan struct{}, 100)
		firstAskHangs = true
	)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		isClose := r.Header.Get("TTL") == "3600"
		hang := isClose
		if isClose {
			closes++
		} else {
			askTries++
			if hang = firstAskHangs; !hang {
				asks++
			}
			firstAskHangs = false
		}
		mu.Unlock()
		if isClose {
			closeArrived <- struct{}{}
		}
		got <- struct{}{}
		if hang { // taken whole, never answered
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer svc.Close()
	d := newDevice(t, "/phone")
	if err := subs.Put(store.Room(tokA), Subscription{ID: "s1", Endpoint: svc.URL + "/phone",
		P256dh: base64.RawURLEncoding.EncodeToString(d.key.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(d.auth)}); err != nil {
		t.Fatal(err)
	}
	h := hub.New(hub.Options{})
	defer h.Close()
	p := New(Options{Hub: h, Subscriptions: subs, Keys: keys, AllowHTTP: true, AllowPrivateEndpoints: true,
		Client: &http.Client{Timeout: 200 * time.Millisecond}, Tries: 4, Backoff: time.Millisecond})
	defer p.Close()
	count := func() (int, int, int) { mu.Lock(); defer mu.Unlock(); return asks, askTries, closes }
	askQ := func(id string) {
		go func() {
			_, _ = h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: id, Text: "Deploy?", Timeout: 2 * time.Hour})
		}()
	}
	askQ("q-1")
	for { // its first try hangs, its second goes through
		<-got
		if n, _, _ := count(); n == 1 {
			break
		}
	}
	if err := h.Answer(context.Background(), tokA, wire.AskQuestion, "q-1", hub.Reply{ClientID: "pc", Nickname: "PC"}); err != nil {
		t.Fatal(err)
	}
	<-closeArrived
	askQ("q-2") // pushed after every try of the close
	for {
		<-got
		if n, _, _ := count(); n == 2 {
			break
		}
	}
	if _, tries, c := count(); c != 1 || tries != 3 {
		t.Fatalf("%d closes pushed, want 1; %d tries of 2 asks, want 3", c, tries)
	}
}

// stuckClose is a cluster's Closes whose NATS cannot be reached: every
// step waits, as the cluster's retries do, until its context ends.
type stuckClose struct {
	leftClose
	asked chan struct{} // a step began
}

func (c *stuckClose) Closing(ctx context.Context, _, _, _ string) (bool, error) {
	c.asked <- struct{}{}
	<-ctx.Done()
	return false, ctx.Err()
}

// TestCloseOnUnreachableNATSHoldsNoShutdown: a close being decided while
// NATS cannot be reached (its steps retry for up to 20 s each) is given
// up when the server stops: Pusher.Close ends the step and returns; the
// close, on record as decided or owed, is another instance's sweep's.
func TestCloseOnUnreachableNATSHoldsNoShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		keys, subs := keysAndSubs(t, t.TempDir())
		d := newDevice(t, "/phone")
		if err := subs.Put(store.Room(tokA), Subscription{ID: "s1", Endpoint: "https://push.example/phone",
			P256dh: base64.RawURLEncoding.EncodeToString(d.key.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(d.auth)}); err != nil {
			t.Fatal(err)
		}
		svc := roundTrip(func(*http.Request) {})
		h := hub.New(hub.Options{})
		defer h.Close()
		cl := &stuckClose{asked: make(chan struct{}, 1)}
		p := New(Options{Hub: h, Subscriptions: subs, Keys: keys, Client: &http.Client{Transport: svc}, Closes: cl})
		go func() {
			_, _ = h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?", Timeout: time.Hour})
		}()
		synctest.Wait()
		if err := h.Answer(context.Background(), tokA, wire.AskQuestion, "q-1", hub.Reply{ClientID: "pc", Nickname: "PC"}); err != nil {
			t.Fatal(err)
		}
		<-cl.asked
		// Were the step deaf to Close, this would wait for ever: the
		// bubble's goroutines all blocked, synctest fails the test.
		p.Close()
	})
}
