package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Relay sessions across instances: the relay's Cluster (srv/relay,
// cluster.go), over NATS.
//
//   - The home of each relay session (the instance its host is on) is a
//     record in the bucket agentassistant_relay_hosts, key
//     "<room digest>.<base64url(session)>", written by compare-and-set;
//     every instance follows the bucket (Relay.Moved).
//   - Frames for one relay session on one instance go to the subject
//     aa.relay.<room digest>.<base64url(session)>.<base64url(instance)>;
//     each instance subscribes to its own, so an instance's frames arrive
//     in order, on one goroutine (nats.go's, for the subscription).
//   - Requests (the home's state, a user message to take) go to
//     aa.relayq.<base64url(instance)>.<digest>.<session> and are answered
//     each on a goroutine of its own; aa.relayping.<base64url(instance)>
//     answers at once while the instance runs (Alive).
//
// The token never goes to NATS: rooms are its digest (store.Room).

// RelayHostsBucket keeps the home of every relay session.
const RelayHostsBucket = "agentassistant_relay_hosts"

// RelayLink is the relay's link to the other instances. Start it with the
// relay; Close stops it and waits.
type RelayLink struct {
	c  *Cluster
	kv jetstream.KeyValue

	mu     sync.Mutex
	homes  map[string]relay.Home // by key
	misses map[string]int        // pings unanswered in a row, by instance

	stop   context.CancelFunc
	wg     sync.WaitGroup
	gate   sync.Mutex // closed and wg.Go, so nothing starts once Close waits
	closed bool
	subs   []*nats.Subscription
	once   sync.Once
}

// Relay opens the relay sessions' bucket.
func (c *Cluster) Relay(ctx context.Context) (*RelayLink, error) {
	kv, err := c.openKV(ctx, jetstream.KeyValueConfig{Bucket: RelayHostsBucket,
		Description: "agentassistant relay sessions: the instance each one's host is on"})
	if err != nil {
		return nil, err
	}
	return &RelayLink{c: c, kv: kv, homes: make(map[string]relay.Home), misses: make(map[string]int)}, nil
}

func hostKey(token, session string) string { return store.Room(token) + "." + b64(session) }

// Start follows the bucket into r and serves the frames and requests
// other instances send here. It returns once the records present are in.
func (l *RelayLink) Start(r *relay.Relay) error {
	ctx, stop := context.WithCancel(context.Background())
	l.stop = stop
	w, err := l.c.watchAll(ctx, l.kv)
	if err != nil {
		stop()
		return fmt.Errorf("watch bucket %s: %w", RelayHostsBucket, err)
	}
	me := b64(l.c.o.Instance)
	for _, s := range []struct {
		what, subject string
		handle        nats.MsgHandler
	}{
		{"relay frames", "aa.relay.*.*." + me, func(m *nats.Msg) {
			if token, session, f, ok := l.frame(m, 2, 3); ok {
				r.Receive(token, session, f)
			}
		}},
		{"relay requests", "aa.relayq." + me + ".*.*", func(m *nats.Msg) {
			token, session, f, ok := l.frame(m, 3, 4)
			if !ok {
				return
			}
			l.gate.Lock()
			defer l.gate.Unlock()
			if l.closed {
				return
			}
			l.wg.Go(func() {
				ans := r.Answer(ctx, token, session, f)
				b, _ := json.Marshal(ans)
				_ = m.Respond(b)
			})
		}},
		{"relay pings", "aa.relayping." + me, func(m *nats.Msg) { _ = m.Respond(nil) }},
	} {
		sub, err := l.c.nc.Subscribe(s.subject, s.handle)
		if err != nil {
			l.unsubscribe()
			stop()
			_ = w.Stop()
			return fmt.Errorf("subscribe to %s: %w", s.what, err)
		}
		l.subs = append(l.subs, sub)
	}
	ready := make(chan struct{})
	l.wg.Go(func() {
		follow(ctx, w, func() { close(ready) }, func(e jetstream.KeyValueEntry) { l.heard(e, r) })
	})
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		return errors.New("read bucket " + RelayHostsBucket + ": timed out")
	}
	return nil
}

// frame reads m's room digest and session from its subject's tokens
// room and session, and the frame it carries.
func (l *RelayLink) frame(m *nats.Msg, room, session int) (token, name string, f relay.Frame, ok bool) {
	parts := strings.Split(m.Subject, ".")
	if len(parts) <= max(room, session) {
		return "", "", f, false
	}
	if token, ok = l.c.rooms[parts[room]]; !ok {
		return "", "", f, false // another deployment's token
	}
	name, ok = unb64(parts[session])
	return token, name, f, ok && json.Unmarshal(m.Data, &f) == nil
}

// heard takes one change of the bucket into homes and r.
func (l *RelayLink) heard(e jetstream.KeyValueEntry, r *relay.Relay) {
	i := strings.IndexByte(e.Key(), '.')
	if i < 0 {
		return
	}
	token, ok := l.c.rooms[e.Key()[:i]]
	session, ok2 := unb64(e.Key()[i+1:])
	if !ok || !ok2 {
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		l.mu.Lock()
		delete(l.homes, e.Key())
		l.mu.Unlock()
		r.Moved(token, session, relay.Home{}, true)
		return
	}
	h, ok := decodeHome(e.Value())
	if !ok {
		return
	}
	l.mu.Lock()
	l.homes[e.Key()] = h
	l.mu.Unlock()
	r.Moved(token, session, h, false)
}

func (l *RelayLink) unsubscribe() {
	for _, s := range l.subs {
		_ = s.Unsubscribe()
	}
	l.subs = nil
}

// Close stops following the bucket and serving, and waits. Idempotent.
func (l *RelayLink) Close() error {
	l.once.Do(func() {
		l.unsubscribe()
		l.gate.Lock()
		l.closed = true
		l.gate.Unlock()
		if l.stop != nil {
			l.stop()
		}
		l.wg.Wait()
	})
	return nil
}

// The relay's Cluster.

// Instance is this instance's name.
func (l *RelayLink) Instance() string { return l.c.o.Instance }

// Home is the last record of (token, session) seen.
func (l *RelayLink) Home(token, session string) (relay.Home, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.homes[hostKey(token, session)]
	return h, ok
}

// Claim writes next(prev) over the record by compare-and-set.
func (l *RelayLink) Claim(ctx context.Context, token, session string, next func(prev relay.Home) relay.Home) (relay.Home, error) {
	k := hostKey(token, session)
	var prev, h relay.Home
	_, err := changeKey(ctx, l.kv, k, 0, func(old []byte, _ uint64) ([]byte, bool, error) {
		prev, _ = decodeHome(old)
		h = next(prev)
		b, err := json.Marshal(h)
		return b, true, err
	})
	if err != nil {
		return prev, fmt.Errorf("claim relay home: %w", err)
	}
	l.mu.Lock()
	l.homes[k] = h
	l.mu.Unlock()
	return prev, nil
}

// Update writes h if the record still names h's instance.
func (l *RelayLink) Update(ctx context.Context, token, session string, h relay.Home) error {
	_, err := changeKey(ctx, l.kv, hostKey(token, session), 10, func(old []byte, rev uint64) ([]byte, bool, error) {
		if cur, ok := decodeHome(old); rev == 0 || !ok || cur.Instance != h.Instance || cur.Host != h.Host {
			return nil, false, nil // none, or another host's now
		}
		b, err := json.Marshal(h)
		return b, true, err
	})
	if err != nil {
		return fmt.Errorf("update relay home: %w", err)
	}
	return nil
}

// decodeHome is the record b, and whether it decodes (nil does not).
func decodeHome(b []byte) (relay.Home, bool) {
	var h relay.Home
	err := json.Unmarshal(b, &h)
	return h, err == nil
}

// Delete removes the record if it names h's instance and host offline.
func (l *RelayLink) Delete(ctx context.Context, token, session string, h relay.Home) error {
	k := hostKey(token, session)
	e, err := l.kv.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read relay home: %w", err)
	}
	if cur, ok := decodeHome(e.Value()); !ok || cur.Instance != h.Instance || cur.Host != h.Host || cur.Online {
		return nil // another host's now, or online
	}
	err = l.kv.Delete(ctx, k, jetstream.LastRevision(e.Revision()))
	if err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return fmt.Errorf("delete relay home: %w", err)
	}
	return nil
}

// Send publishes f to the relay session on instance. nats.go buffers it:
// it does not wait for the network.
func (l *RelayLink) Send(instance, token, session string, f relay.Frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode relay frame: %w", err)
	}
	if err := l.c.nc.Publish("aa.relay."+store.Room(token)+"."+b64(session)+"."+b64(instance), b); err != nil {
		return fmt.Errorf("send relay frame: %w", err)
	}
	return nil
}

// Request asks the relay session on instance.
func (l *RelayLink) Request(ctx context.Context, instance, token, session string, f relay.Frame) (relay.Frame, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return relay.Frame{}, fmt.Errorf("encode relay request: %w", err)
	}
	m, err := l.c.nc.RequestWithContext(ctx, "aa.relayq."+b64(instance)+"."+store.Room(token)+"."+b64(session), b)
	if err != nil {
		return relay.Frame{}, fmt.Errorf("relay request: %w", err)
	}
	var ans relay.Frame
	if err := json.Unmarshal(m.Data, &ans); err != nil {
		return relay.Frame{}, fmt.Errorf("decode relay answer: %w", err)
	}
	return ans, nil
}

// Reserve takes a study session's id for this instance: the key
// study.<id> in the bucket, created once.
func (l *RelayLink) Reserve(ctx context.Context, id string) (bool, error) {
	_, err := l.kv.Create(ctx, "study."+id, []byte(l.c.o.Instance))
	if errors.Is(err, jetstream.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reserve study session id: %w", err)
	}
	return true, nil
}

// Alive pings instance: gone when nothing there listens (NATS says so at
// once, as soon as the instance's connection dropped), or when three
// pings in a row went unanswered.
func (l *RelayLink) Alive(ctx context.Context, instance string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := l.c.nc.RequestWithContext(ctx, "aa.relayping."+b64(instance), nil)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		delete(l.misses, instance)
		return true
	case errors.Is(err, nats.ErrNoResponders):
		delete(l.misses, instance)
		return false
	case l.c.nc.Status() != nats.CONNECTED:
		return true // it is us who cannot reach NATS: no news of it
	default:
		l.misses[instance]++
		return l.misses[instance] < 3
	}
}
