package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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

	// Its goroutine's own:
	w     jetstream.KeyWatcher
	wstop context.CancelFunc // ends w's subscription
	last  uint64             // the revision of the last entry delivered
}

// watchAll watches every key of kv until ctx ends or Stop.
func (c *Cluster) watchAll(ctx context.Context, kv jetstream.KeyValue) (*rewatch, error) {
	ctx, stop := context.WithCancel(ctx)
	rw := &rewatch{c: c, kv: kv, bucket: kv.Bucket(), out: make(chan jetstream.KeyValueEntry), stop: stop}
	back := c.reconnected() // before the watcher is made: a reconnect from now on renews it
	wctx, wstop := context.WithCancel(ctx)
	w, err := kv.WatchAll(wctx)
	if err != nil {
		wstop()
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
			if !rw.renew(ctx) {
				return
			}
		case e, ok := <-rw.w.Updates():
			if !ok {
				if !rw.renew(ctx) {
					return
				}
				continue
			}
			if e != nil {
				if e.Revision() <= rw.last {
					continue // delivered by the watcher before
				}
				rw.last = e.Revision()
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
func (rw *rewatch) renew(ctx context.Context) bool {
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
			rw.c.log.Info("watching the bucket again after NATS came back", "bucket", rw.bucket, "from", rw.last+1)
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
