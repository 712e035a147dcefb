package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/srv/push"
)

// Web Push in cluster mode. Every instance pushes what happened on it
// (the hub's events are emitted once in the cluster) and takes the
// answers of any notification, so they share, in JetStream:
//   - the VAPID keys (a subscription is made for one key pair) and the
//     key capabilities are signed with (answercap.NewShared), each made
//     once by whichever instance comes first;
//   - the devices' subscriptions, one key per room, changed by
//     compare-and-set and followed by every instance, which reads them
//     from memory on each event;
//   - the capabilities used, each a key made once (good once), kept
//     until it would have expired anyway.

// The buckets of Web Push.
const (
	PushBucket   = "agentassistant_push"
	ClaimsBucket = "agentassistant_claims"
)

// claimsFor is how long a used capability is remembered: longer than
// any lives (a day at most).
const claimsFor = 25 * time.Hour

// Push is Web Push's share of the cluster. Its Subscriptions and Claim
// are safe for concurrent use; Close stops following the subscriptions.
type Push struct {
	// Keys sign the pushes; CapKey signs the capabilities.
	Keys   push.Keys
	CapKey []byte

	kv, claims  jetstream.KeyValue
	rooms       map[string]string // room digest -> token
	by          string            // this instance's name, in the closes it decides
	unreachable func(error) bool  // NATS did not answer

	mu   sync.Mutex                     // held alone
	subs map[string][]push.Subscription // by room, as last heard

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// OpenPush opens Web Push's buckets, making the keys if no instance has,
// and follows the subscriptions.
func (c *Cluster) OpenPush(ctx context.Context) (*Push, error) {
	kv, err := c.openKV(ctx, jetstream.KeyValueConfig{Bucket: PushBucket,
		Description: "agentassistant Web Push: keys and subscriptions"})
	if err != nil {
		return nil, err
	}
	claims, err := c.openKV(ctx, jetstream.KeyValueConfig{Bucket: ClaimsBucket,
		Description: "agentassistant capabilities used", TTL: claimsFor})
	if err != nil {
		return nil, err
	}
	p := &Push{kv: kv, claims: claims, rooms: c.rooms, subs: map[string][]push.Subscription{},
		by: c.o.Instance, unreachable: c.placeLater}
	kb, err := c.keepOnce(ctx, kv, "vapid", func() ([]byte, error) {
		priv, pub, err := webpush.GenerateVAPIDKeys()
		if err != nil {
			return nil, err
		}
		return json.Marshal(push.Keys{Public: pub, Private: priv})
	})
	if err != nil {
		return nil, fmt.Errorf("push keys: %w", err)
	}
	if err := json.Unmarshal(kb, &p.Keys); err != nil || p.Keys.Public == "" || p.Keys.Private == "" {
		return nil, fmt.Errorf("push keys in bucket %s: not the server's", PushBucket)
	}
	if p.CapKey, err = c.keepOnce(ctx, kv, "capkey", func() ([]byte, error) {
		k := make([]byte, 32)
		_, err := rand.Read(k)
		return k, err
	}); err != nil {
		return nil, fmt.Errorf("capability key: %w", err)
	}
	if err := p.follow(ctx, c); err != nil {
		return nil, err
	}
	return p, nil
}

// keepOnce is the value of key, made by mk and kept if no instance has
// kept one yet. It is read at start, when the bucket may not be served
// yet: see untilServed.
func (c *Cluster) keepOnce(ctx context.Context, kv jetstream.KeyValue, key string, mk func() ([]byte, error)) ([]byte, error) {
	var v []byte
	err := c.untilServed(ctx, key+" in bucket "+kv.Bucket(), func(ctx context.Context) error {
		for range 3 {
			e, err := kv.Get(ctx, key)
			if err == nil {
				v = e.Value()
				return nil
			}
			if !errors.Is(err, jetstream.ErrKeyNotFound) {
				return err
			}
			if v, err = mk(); err != nil {
				return err
			}
			if _, err := kv.Create(ctx, key, v); err == nil {
				return nil
			} else if !errors.Is(err, jetstream.ErrKeyExists) {
				return err
			}
			// Another instance made it first: read that one.
		}
		return fmt.Errorf("%s keeps changing", key)
	})
	return v, err
}

const subsPrefix = "subs."

// follow reads the subscriptions there are, then keeps them up to date
// on a goroutine of p's until Close. The watch is made again as soon as
// NATS comes back (watchAll), as the other buckets' are: a subscription
// kept through another instance just after NATS restarted is pushed to
// from here at once, not once nats.go notices its consumer is gone.
func (p *Push) follow(ctx context.Context, c *Cluster) error {
	// The watch outlives ctx, which bounds only the first read.
	wctx, stop := context.WithCancel(context.Background())
	w, err := c.watchAll(wctx, p.kv)
	if err != nil {
		stop()
		return fmt.Errorf("watch bucket %s: %w", PushBucket, err)
	}
	p.stop = stop
	initial := make(chan struct{})
	p.wg.Go(func() {
		follow(wctx, w, func() { close(initial) }, func(e jetstream.KeyValueEntry) {
			if strings.HasPrefix(e.Key(), subsPrefix) { // not the keys
				p.heard(e)
			}
		})
	})
	select {
	case <-initial:
		return nil
	case <-ctx.Done():
		p.Close()
		return ctx.Err()
	}
}

// heard takes one change of a room's subscriptions.
func (p *Push) heard(e jetstream.KeyValueEntry) {
	room := strings.TrimPrefix(e.Key(), subsPrefix)
	var subs []push.Subscription
	if e.Operation() == jetstream.KeyValuePut {
		if err := json.Unmarshal(e.Value(), &subs); err != nil {
			return
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(subs) == 0 {
		delete(p.subs, room)
		return
	}
	p.subs[room] = subs
}

// Close stops following the subscriptions.
func (p *Push) Close() {
	if p.stop != nil {
		p.stop()
	}
	p.wg.Wait()
}

// Subscriptions are the devices' subscriptions of every instance.
func (p *Push) Subscriptions() push.Subscriptions { return (*pushSubs)(p) }

type pushSubs Push

func (s *pushSubs) List(room string) ([]push.Subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.subs[room]), nil
}

// Put keeps sub, refusing a new endpoint past the token's bound. The
// look at the bound is made on the room's subscriptions as stored, in
// the compare-and-set that keeps sub: an instance's Pusher looks at what
// it has heard of, and instances taking subscriptions at once would
// each see room.
func (s *pushSubs) Put(room string, sub push.Subscription) error {
	_, err := s.change(room, func(subs []push.Subscription) ([]push.Subscription, error) {
		n := len(subs)
		subs = slices.DeleteFunc(subs, func(o push.Subscription) bool { return o.Endpoint == sub.Endpoint || o.ID == sub.ID })
		if n == len(subs) && n >= push.MaxSubscriptionsPerToken {
			return nil, push.ErrTooManySubscriptions
		}
		return append(subs, sub), nil
	})
	return err
}

func (s *pushSubs) Remove(room string, which func(push.Subscription) bool) (bool, error) {
	return s.change(room, func(subs []push.Subscription) ([]push.Subscription, error) {
		return slices.DeleteFunc(subs, which), nil
	})
}

// change replaces room's subscriptions with edit's, by compare-and-set
// (another instance may change them meanwhile), or returns edit's
// error; changed says edit changed them.
func (s *pushSubs) change(room string, edit func([]push.Subscription) ([]push.Subscription, error)) (changed bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var next []push.Subscription
	var editErr error // edit's own: returned as it is
	changed, err = changeKey(ctx, s.kv, subsPrefix+room, 16, func(old []byte, rev uint64) ([]byte, bool, error) {
		var subs []push.Subscription
		if rev != 0 {
			if err := json.Unmarshal(old, &subs); err != nil {
				return nil, false, fmt.Errorf("decode: %w", err)
			}
		}
		if next, editErr = edit(slices.Clone(subs)); editErr != nil {
			return nil, false, editErr
		}
		b, err := json.Marshal(next)
		return b, err == nil && (rev != 0 || len(next) > 0) && !bytes.Equal(b, old), err
	})
	switch {
	case editErr != nil:
		return false, editErr
	case err != nil:
		return false, fmt.Errorf("keep push subscriptions: %w", err)
	case changed:
		s.mu.Lock()
		s.subs[room] = next // read as written, before the watch tells it
		if len(next) == 0 {
			delete(s.subs, room)
		}
		s.mu.Unlock()
	}
	return changed, nil
}

// staleClaim is the age past which a claim of a capability tapped again
// is taken over: its instance died between the claim and the answer's
// save (a live one saves within seconds), or it saved the answer, which
// the request's record then keeps from being answered twice.
const staleClaim = 10 * time.Second

// Claim marks the capability nonce used; false when it was already, by a
// claim younger than staleClaim.
func (p *Push) Claim(ctx context.Context, nonce string, _ time.Time) (bool, error) {
	// Released meanwhile, the next tap claims it; of two taking a stale
	// claim over, one does.
	return createOrTake(ctx, p.claims, "u."+nonce, []byte{1}, func(e jetstream.KeyValueEntry) bool {
		return time.Since(e.Created()) >= staleClaim
	})
}

// Release forgets the claim of the capability nonce.
func (p *Push) Release(ctx context.Context, nonce string) error {
	if err := p.claims.Delete(ctx, "u."+nonce); err != nil {
		return fmt.Errorf("release a capability: %w", err)
	}
	return nil
}

// Token is the token of room, when it is one of the server's.
func (p *Push) Token(room string) (string, bool) {
	t, ok := p.rooms[room]
	return t, ok
}

// The closes of questions pushed (push.Closes): a key per question and
// device in the claims bucket (it forgets them after claimsFor), whose
// value is where its notification stands (closeRecord).
const (
	closePushing = "pushing" // its question's push is in flight
	closePushed  = "pushed"  // its question's push went through
	closeOwed    = "owed"    // settled during the push: its pusher closes
	closeClosing = "closing" // its close is decided, by the instance named, and not pushed yet
	closeClosed  = "closed"  // its close is pushed (or given up)
)

// closeRecord is the value of a close's key: its state, the instance
// that wrote it, and what it is of, so that another instance can take
// over a close its instance left (Left, Adopt). A value of an older
// version is its state alone, and so is a close pushed (closeClosed),
// which every version reads.
type closeRecord struct {
	State string `json:"s"`
	By    string `json:"by,omitempty"`
	Room  string `json:"r,omitempty"`
	ID    string `json:"q,omitempty"`
	Sub   string `json:"d,omitempty"`
}

func readClose(v []byte) closeRecord {
	var r closeRecord
	if len(v) > 0 && v[0] == '{' && json.Unmarshal(v, &r) == nil {
		return r
	}
	return closeRecord{State: string(v)}
}

// staleClose is the age past which a push in flight is taken for one
// whose instance died: longer than a push's tries take.
const staleClose = 2 * time.Minute

// closeTries bounds how long a close's step waits for NATS (a restart,
// a leader elected) before the instance decides alone: a close pushed
// twice rather than none, only when NATS cannot be reached at all.
const closeTries = 20 * time.Second

func closeKey(room, id, sub string) string { return keyOf("c.", room+"\x00"+id+"\x00"+sub) }

// closeStep moves a question's close on from what is stored, by
// compare-and-set: next is given the state stored ("" for none) and its
// age, and says what to store ("" for nothing) and what to report. A
// NATS that does not answer (restarting) is tried again, for up to
// closeTries.
func (p *Push) closeStep(ctx context.Context, room, id, sub string, next func(state string, age time.Duration) (string, bool)) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, closeTries)
	defer cancel()
	key := closeKey(room, id, sub)
	var out bool
	wait := openRetry
	for {
		tctx, tcancel := context.WithTimeout(ctx, openTry)
		_, err := changeKey(tctx, p.claims, key, 16, func(old []byte, rev uint64) ([]byte, bool, error) {
			var age time.Duration
			if rev != 0 {
				if e, err := p.claims.Get(tctx, key); err == nil && e.Revision() == rev {
					age = time.Since(e.Created())
				}
			}
			var to string
			to, out = next(readClose(old).State, age)
			switch to {
			case "":
				return nil, false, nil
			case closeClosed:
				// Its state alone, as builds before the records carried
				// JSON read it: one not yet upgraded then neither pushes
				// the question after its close nor the close again. No
				// other instance needs more of a close pushed (Left).
				return []byte(closeClosed), true, nil
			}
			b, err := json.Marshal(closeRecord{State: to, By: p.by, Room: room, ID: id, Sub: sub})
			return b, true, err
		})
		tcancel()
		if err == nil {
			return out, nil
		}
		if ctx.Err() != nil || !p.unreachable(err) || time.Now().Add(wait).After(deadlineOf(ctx)) {
			return false, fmt.Errorf("a push's close: %w", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("a push's close: %w", err)
		case <-t.C:
		}
		wait = min(2*wait, openMaxRetry)
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// Pushing marks the question's push in flight, unless its close is
// pushed, decided or owed already.
func (p *Push) Pushing(ctx context.Context, room, id, sub string) (bool, error) {
	return p.closeStep(ctx, room, id, sub, func(s string, _ time.Duration) (string, bool) {
		if s == closeOwed || s == closeClosing || s == closeClosed {
			return "", false
		}
		return closePushing, true
	})
}

// Pushed marks the question's push through; true when it was settled
// meanwhile, its close then this instance's (marked closing by it until
// Closed). Closed meanwhile by an instance that took this push for a
// dead one's (TakeOver, Closing), it is not closed again: this instance
// was only slow (stopped), and its push reached the push service before
// it stopped, or is cut.
func (p *Push) Pushed(ctx context.Context, room, id, sub string) (bool, error) {
	return p.closeStep(ctx, room, id, sub, func(s string, _ time.Duration) (string, bool) {
		switch s {
		case closePushing:
			return closePushed, false
		case closeOwed:
			return closeClosing, true
		}
		return "", false
	})
}

// TakeOver makes the close owed to the instance pushing the question
// this instance's (true), unless that one pushed it meanwhile.
func (p *Push) TakeOver(ctx context.Context, room, id, sub string) (bool, error) {
	return p.closeStep(ctx, room, id, sub, func(s string, _ time.Duration) (string, bool) {
		if s == closeOwed {
			return closeClosing, true
		}
		return "", false
	})
}

// Closing is true when the close of a settle is this instance's (marked
// closing by it until Closed): false while the question's push is in
// flight (its instance closes it then), or when it is closed, decided
// or owed already.
func (p *Push) Closing(ctx context.Context, room, id, sub string) (bool, error) {
	return p.closeStep(ctx, room, id, sub, func(s string, age time.Duration) (string, bool) {
		switch {
		case s == closePushing && age < staleClose:
			return closeOwed, false
		case s == closeOwed || s == closeClosing || s == closeClosed:
			return "", false
		}
		return closeClosing, true
	})
}

// Closed marks the question's close pushed (or given up).
func (p *Push) Closed(ctx context.Context, room, id, sub string) error {
	_, err := p.closeStep(ctx, room, id, sub, func(s string, _ time.Duration) (string, bool) {
		if s == closeClosed {
			return "", false
		}
		return closeClosed, true
	})
	return err
}

// Left lists the closes not pushed whose record has not changed for
// age: decided or owed (their instance died or stopped before pushing
// them), or a push of their question (which may since have been settled
// on an instance that died before deciding its close). Read from one
// watch of the bucket's latest values.
func (p *Push) Left(ctx context.Context, age time.Duration) ([]push.Left, error) {
	ctx, cancel := context.WithTimeout(ctx, openTry)
	defer cancel()
	var left []push.Left
	err := readPresent(ctx, p.claims, "c.>", "the pushes' closes", func(e jetstream.KeyValueEntry) error {
		r := readClose(e.Value())
		if r.State == closeClosed || r.Room == "" || time.Since(e.Created()) < age {
			return nil
		}
		if tok, ok := p.rooms[r.Room]; ok {
			left = append(left, push.Left{Token: tok, Room: r.Room, ID: r.ID, Sub: r.Sub, Owed: r.State == closeOwed || r.State == closeClosing})
		}
		return nil
	})
	return left, err
}

// Adopt makes the close l this instance's (true) if its record has not
// changed for age still and is not closed.
func (p *Push) Adopt(ctx context.Context, l push.Left, age time.Duration) (bool, error) {
	return p.closeStep(ctx, l.Room, l.ID, l.Sub, func(s string, a time.Duration) (string, bool) {
		if s == closeClosed || s == "" || a < age {
			return "", false
		}
		return closeClosing, true
	})
}
