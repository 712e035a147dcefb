package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// Presence across instances.
//
// Every device connected to an instance has a key in the bucket
// agentassistant_presence: <room digest>.<instance>.<client id>, its
// value the device's nickname and when it connected. The instance puts
// it when the device joins (and renames), deletes it when the device
// leaves; every instance watches the bucket and tells its hub of the
// other instances' devices (hub.Hub.RemoteJoin, RemoteLeave).
//
// An instance killed deletes nothing: its heartbeat stops, its key in the
// instances bucket expires (five heartbeats), and the instances still
// alive, checking every heartbeat, drop its devices from their lists and
// delete its keys. An instance restarted under the same name deletes
// what its previous run left. An instance whose own key is deleted while
// its device is still connected (counted dead during a long NATS outage)
// puts it again.
//
// The writes go through one goroutine (publish), in order, so a join and
// the leave after it are never swapped, and a device's login never waits
// for NATS.

// PresenceBucket names the presence bucket in JetStream.
const PresenceBucket = "agentassistant_presence"

// maxNickname bounds the bytes of a device's nickname read from the
// presence bucket (then marked cut): the doors keep one to 64
// characters.
const maxNickname = 256

// present is a device's value in the presence bucket.
type present struct {
	Nickname    string    `json:"nickname"`
	ConnectedAt time.Time `json:"connectedAt"`
}

// roster is this instance's side of presence.
type roster struct {
	kv   jetstream.KeyValue
	kick owned.Wake // want changed

	mu    sync.Mutex
	want  map[string]*present // key -> value to write; nil: delete
	local map[string]present  // the keys of the devices connected here
}

func (c *Cluster) openPresence(ctx context.Context) error {
	kv, err := c.openKV(ctx, jetstream.KeyValueConfig{Bucket: PresenceBucket,
		Description: "agentassistant devices online, by room and instance"})
	if err != nil {
		return err
	}
	c.roster = &roster{kv: kv, kick: owned.NewWake(), want: make(map[string]*present), local: make(map[string]present)}
	return nil
}

func presenceKey(room, instance, id string) string {
	return room + "." + b64(instance) + "." + id
}

// splitPresenceKey returns a key's room, instance and client id.
func splitPresenceKey(k string) (room, instance, id string, ok bool) {
	parts := strings.Split(k, ".")
	if len(parts) != 3 {
		return "", "", "", false
	}
	instance, ok = unb64(parts[1])
	return parts[0], instance, parts[2], ok
}

// validClientID: the hub's client IDs are hex; a key holds nothing else.
func validClientID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	return strings.Trim(id, "0123456789abcdef") == ""
}

// Joined queues the put of c's key (hub.Peers).
func (c *Cluster) Joined(room string, cl hub.Client) {
	if !validClientID(cl.ID()) {
		return
	}
	v := present{Nickname: cl.Nickname(), ConnectedAt: cl.ConnectedAt()}
	k := presenceKey(room, c.o.Instance, cl.ID())
	r := c.roster
	r.mu.Lock()
	r.local[k] = v
	r.want[k] = &v
	r.mu.Unlock()
	r.kick.Tell()
}

// Left queues the delete of c's key (hub.Peers).
func (c *Cluster) Left(room string, cl hub.Client) {
	k := presenceKey(room, c.o.Instance, cl.ID())
	r := c.roster
	r.mu.Lock()
	delete(r.local, k)
	r.want[k] = nil
	r.mu.Unlock()
	r.kick.Tell()
}

// publish writes the queued presence changes, in order per key, retrying
// those NATS did not take.
func (c *Cluster) publish(ctx context.Context) {
	r := c.roster
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-retry.C:
		}
		r.mu.Lock()
		batch := r.want
		r.want = make(map[string]*present)
		r.mu.Unlock()
		failed := false
		for k, v := range batch {
			if ctx.Err() != nil {
				return
			}
			if err := r.write(ctx, k, v, c.o.Heartbeat); err != nil {
				failed = true
				c.log.Debug("presence not written", "err", err)
				r.mu.Lock()
				if _, newer := r.want[k]; !newer {
					r.want[k] = v
				}
				r.mu.Unlock()
			}
		}
		if failed {
			retry.Reset(c.o.Heartbeat)
		}
	}
}

func (r *roster) write(ctx context.Context, k string, v *present, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	if v == nil {
		err := r.kv.Delete(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		return err
	}
	b, _ := json.Marshal(v)
	_, err := r.kv.Put(ctx, k, b)
	return err
}

// forgetOwn deletes the keys a previous run of this instance left.
func (c *Cluster) forgetOwn(ctx context.Context) error {
	l, err := c.roster.kv.ListKeysFiltered(ctx, "*."+b64(c.o.Instance)+".*")
	if err != nil {
		return fmt.Errorf("list own presence keys: %w", err)
	}
	for k := range l.Keys() {
		if err := c.roster.kv.Delete(ctx, k); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("delete own presence key: %w", err)
		}
	}
	return nil
}

// remoteDevice is a device of another instance, as last heard.
type remoteDevice struct {
	token, instance, id string
	user                hub.RemoteUser
	shown               bool // told to the hub
}

// watchPresence follows the presence bucket into h, and every heartbeat
// drops the devices of instances no longer alive.
func (c *Cluster) watchPresence(ctx context.Context, w jetstream.KeyWatcher, h *hub.Hub) {
	defer func() { _ = w.Stop() }()
	devices := make(map[string]*remoteDevice) // by key
	alive := map[string]bool{c.o.Instance: true}
	check := time.NewTicker(c.o.Heartbeat)
	defer check.Stop()
	purge := time.NewTicker(presencePurgeEvery)
	defer purge.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-purge.C:
			pctx, cancel := context.WithTimeout(ctx, c.o.Heartbeat)
			// Delete markers pile up, one per device ever connected.
			_ = c.roster.kv.PurgeDeletes(pctx)
			cancel()
		case <-check.C:
			alive = c.aliveInstances(ctx, alive)
			for k, d := range devices {
				if alive[d.instance] && !d.shown {
					d.shown = true
					h.RemoteJoin(d.token, d.user)
				}
				if !alive[d.instance] {
					if d.shown {
						h.RemoteLeave(d.token, d.instance, d.id)
					}
					delete(devices, k)
					dctx, cancel := context.WithTimeout(ctx, c.o.Heartbeat)
					if err := c.roster.kv.Delete(dctx, k); err == nil {
						c.log.Info("device of an instance no longer alive dropped", "instance", d.instance)
					}
					cancel()
				}
			}
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue
			}
			c.applyPresence(ctx, h, e, devices, alive)
		}
	}
}

// presencePurgeEvery is how often the presence bucket's delete markers
// are purged.
const presencePurgeEvery = 10 * time.Minute

func (c *Cluster) applyPresence(ctx context.Context, h *hub.Hub, e jetstream.KeyValueEntry, devices map[string]*remoteDevice, alive map[string]bool) {
	room, inst, id, ok := splitPresenceKey(e.Key())
	if !ok || !validClientID(id) {
		return
	}
	token, ok := c.rooms[room]
	if !ok {
		return
	}
	if inst == c.o.Instance {
		// Our own key deleted while the device is still here: put it back.
		if e.Operation() != jetstream.KeyValuePut {
			r := c.roster
			r.mu.Lock()
			if v, here := r.local[e.Key()]; here {
				if _, queued := r.want[e.Key()]; !queued {
					r.want[e.Key()] = &v
				}
			}
			r.mu.Unlock()
			r.kick.Tell()
		}
		return
	}
	if e.Operation() != jetstream.KeyValuePut {
		if d := devices[e.Key()]; d != nil {
			delete(devices, e.Key())
			if d.shown {
				h.RemoteLeave(token, inst, id)
			}
		}
		return
	}
	var v present
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		c.log.Warn("unreadable presence entry", "key", e.Key(), "err", err)
		return
	}
	// Every device of the room is sent it, with each change of
	// presence: one short line, whoever wrote the entry.
	v.Nickname = wire.Clip(wire.OneLine(v.Nickname), maxNickname)
	d := &remoteDevice{token: token, instance: inst, id: id,
		user: hub.RemoteUser{ID: id, Nickname: v.Nickname, ConnectedAt: v.ConnectedAt, Instance: inst}}
	devices[e.Key()] = d
	if !alive[inst] {
		// An instance not yet seen alive: ask, once, rather than wait for
		// the next check (it may just have started).
		gctx, cancel := context.WithTimeout(ctx, c.o.Heartbeat)
		if _, err := c.insts.Get(gctx, inst); err == nil {
			alive[inst] = true
		}
		cancel()
	}
	if alive[inst] {
		d.shown = true
		h.RemoteJoin(token, d.user)
	}
}

// aliveInstances lists the instances whose heartbeat has not expired;
// when NATS cannot say, the last answer stands.
func (c *Cluster) aliveInstances(ctx context.Context, last map[string]bool) map[string]bool {
	ctx, cancel := context.WithTimeout(ctx, c.o.Heartbeat)
	defer cancel()
	l, err := c.insts.ListKeys(ctx)
	if err != nil {
		return last
	}
	alive := map[string]bool{c.o.Instance: true}
	for k := range l.Keys() {
		alive[k] = true
	}
	if ctx.Err() != nil {
		return last
	}
	return alive
}

// startRooms starts presence and chat across instances (Start): it
// deletes what a previous run of this instance left, subscribes to the
// deliveries for this instance's clients, and starts the presence writer
// and watcher, owned by c.wg.
func (c *Cluster) startRooms(ctx context.Context, h *hub.Hub) error {
	// The presence bucket was just opened: its keys are listed again
	// while NATS cannot serve them yet.
	if err := c.untilServed(ctx, "this instance's keys in bucket "+PresenceBucket, c.forgetOwn); err != nil {
		return err
	}
	if err := c.serveDeliveries(h); err != nil {
		return err
	}
	w, err := c.watchAll(ctx, c.roster.kv)
	if err != nil {
		return fmt.Errorf("watch bucket %s: %w", PresenceBucket, err)
	}
	c.wg.Go(func() { c.publish(ctx) })
	c.wg.Go(func() { c.watchPresence(ctx, w, h) })
	return nil
}
