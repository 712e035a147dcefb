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
	insts       jetstream.KeyValue // the instances' heartbeats: whose closes are held
	rooms       map[string]string  // room digest -> token
	by, run     string             // this instance's name and run, in the closes it decides
	unreachable func(error) bool   // NATS did not answer
	now         func() time.Time   // the cluster's clock (Cluster.Now)

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
		insts: c.insts, by: c.o.Instance, run: c.run, unreachable: c.placeLater, now: c.Now}
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
		return p.now().Sub(e.Created()) >= staleClaim
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
