package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/internal/owned"
)

// A watch of a bucket that comes back at once when NATS reconnects.
//
// nats.go's key watcher (an ordered consumer) notices that NATS lost its
// consumer (the server restarted) only when the consumer's heartbeats
// have been missing for two intervals: 10 s or more after the reconnect,
// while every change made meanwhile waits. A rewatch makes its watcher
// again as soon as the connection is back (and whenever the watcher's
// updates end), from the revision after the last one it delivered: the
// changes go on in order, none missed, none twice.
//
// Goroutine: one per rewatch, which reads the watcher and makes it again;
// Stop ends it and waits.

// rewatchTry bounds one attempt to watch a bucket again; rewatchRetry and
// rewatchMaxRetry space the attempts while JetStream is not back yet.
const (
	rewatchTry      = 10 * time.Second
	rewatchRetry    = 50 * time.Millisecond
	rewatchMaxRetry = time.Second
)

type rewatch struct {
	c      *Cluster
	kv     jetstream.KeyValue
	bucket string
	out    chan jetstream.KeyValueEntry
	stop   context.CancelFunc
	wg     sync.WaitGroup
	// kick asks for a new watcher: the probe found this one behind
	// (behind); delivered is last, for the probe to compare.
	kick      owned.Wake
	delivered atomic.Uint64

	// Its goroutine's own:
	w     jetstream.KeyWatcher
	wstop context.CancelFunc // ends w's subscription
	last  uint64             // the revision of the last entry delivered
}

// watchAll watches every key of kv until ctx ends or Stop. It is made
// at start, maybe right after the bucket: it is tried again while NATS
// cannot serve it yet (watchServed).
func (c *Cluster) watchAll(ctx context.Context, kv jetstream.KeyValue) (*rewatch, error) {
	ctx, stop := context.WithCancel(ctx)
	rw := &rewatch{c: c, kv: kv, bucket: kv.Bucket(), out: make(chan jetstream.KeyValueEntry), stop: stop, kick: owned.NewWake()}
	back := c.reconnected() // before the watcher is made: a reconnect from now on renews it
	w, wstop, err := c.watchServed(ctx, ctx, "a watch of bucket "+kv.Bucket(), func(wctx context.Context) (jetstream.KeyWatcher, error) {
		return kv.WatchAll(wctx)
	})
	if err != nil {
		stop()
		return nil, err
	}
	rw.w, rw.wstop = w, wstop
	rw.wg.Go(func() { rw.run(ctx, back) })
	return rw, nil
}

// Updates is as nats.go's: the entries in order, a nil entry once the
// values present at the start are in; closed once the watch is stopped.
func (rw *rewatch) Updates() <-chan jetstream.KeyValueEntry { return rw.out }

// Stop ends the watch and waits for its goroutine.
func (rw *rewatch) Stop() error {
	rw.stop()
	rw.wg.Wait()
	return nil
}

// run delivers the entries; back is closed at the first reconnect after
// the current watcher was made. It is held from one reconnect to the
// next, the next one taken as soon as it fires and before renewing, so a
// reconnect while run waits for its reader or renews is not missed.
func (rw *rewatch) run(ctx context.Context, back <-chan struct{}) {
	defer close(rw.out)
	defer func() { rw.wstop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case <-back:
			back = rw.c.reconnected()
			if !rw.renew(ctx, "NATS came back") {
				return
			}
		case <-rw.kick:
			rw.c.log.Warn("the watch of the bucket fell behind: its consumer is gone, the NATS node that served it lost or no longer leading; watching again",
				"bucket", rw.bucket, "from", rw.last+1)
			if !rw.renew(ctx, "it fell behind") {
				return
			}
		case e, ok := <-rw.w.Updates():
			if !ok {
				if !rw.renew(ctx, "its watcher ended") {
					return
				}
				continue
			}
			if e != nil {
				if e.Revision() <= rw.last {
					continue // delivered by the watcher before
				}
				rw.last = e.Revision()
				rw.delivered.Store(rw.last)
			}
			select {
			case rw.out <- e:
			case <-ctx.Done():
				return
			}
		}
	}
}

// renew replaces the watcher by one from the revision after the last
// delivered, trying again until it can; false when ctx ended first.
func (rw *rewatch) renew(ctx context.Context, why string) bool {
	rw.wstop()
	delay := rewatchRetry
	for {
		wctx, wstop := context.WithCancel(ctx)
		// The context is the subscription's life: the attempt alone is
		// bounded, by a timer stopped once it succeeds.
		bound := time.AfterFunc(rewatchTry, wstop)
		w, err := rw.kv.WatchAll(wctx, jetstream.ResumeFromRevision(rw.last+1))
		if err == nil && bound.Stop() {
			rw.w, rw.wstop = w, wstop
			rw.c.log.Info("watching the bucket again after "+why, "bucket", rw.bucket, "from", rw.last+1)
			return true
		}
		bound.Stop()
		wstop()
		rw.c.log.Debug("cannot watch the bucket again yet", "bucket", rw.bucket, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay = min(2*delay, rewatchMaxRetry)
	}
}

// reconnected is closed when NATS next comes back after losing the
// connection.
func (c *Cluster) reconnected() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.back
}

// onReconnect is nats.go's ReconnectHandler: it wakes the watches.
func (c *Cluster) onReconnect() {
	c.mu.Lock()
	close(c.back)
	c.back = make(chan struct{})
	c.mu.Unlock()
}

// A watcher whose consumer is gone says nothing: nats.go's ordered
// consumer notices only when two of its heartbeats (5 s apart) are
// missing, and makes itself again later still. Its consumer lives on one
// NATS node; when that node is killed or the stream's leadership moves,
// every change waits 10 to 15 s, although the stream takes writes again
// within seconds. The probe (health.go), which reads the stream's last
// revision every second anyway, compares: a watch that has delivered
// nothing over two probes while the stream held more than it has is
// behind, and is made again at once (kick).

// lag is the probe's record of one watch, owned by the probe goroutine.
type lag struct {
	mark  uint64 // the stream's last revision at the previous probe
	seen  uint64 // what the watch had delivered then
	stuck int    // probes in a row it stayed behind without moving
}

// lagProbes in a row behind, without moving, make a watch stalled.
const lagProbes = 2

// behind takes the stream's state at this probe (its last revision and
// how many messages it holds) and what the watch has delivered, and
// reports whether the watch is stalled. A stream with no messages has
// nothing to deliver (its last one expired: the watch never sees it).
func (l *lag) behind(delivered, last, msgs uint64) bool {
	switch {
	case msgs == 0 || delivered >= l.mark:
		l.stuck = 0
	case delivered == l.seen:
		l.stuck++
	default:
		l.stuck = 0
	}
	l.mark, l.seen = last, delivered
	if l.stuck >= lagProbes {
		l.stuck = 0
		return true
	}
	return false
}
