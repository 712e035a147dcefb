package cluster

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A watch of a bucket that comes back at once when NATS reconnects.
//
// nats.go's key watcher (an ordered consumer) notices that NATS lost its
// consumer (the server restarted) only when the consumer's heartbeats
// have been missing for two intervals: 10 s or more after the reconnect,
// while every change made meanwhile waits. A rewatch is replaced as soon
// as the connection is back (and whenever its updates end), by a watcher
// from the revision after the last one it delivered: the changes go on in
// order, none missed, none twice.

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
	w      jetstream.KeyWatcher
	stop   context.CancelFunc // ends w's subscription
	last   uint64             // the revision of the last entry delivered
	bucket string
}

// watchAll starts a rewatch of every key of kv. Stop it when done.
func (c *Cluster) watchAll(ctx context.Context, kv jetstream.KeyValue) (*rewatch, error) {
	rw := &rewatch{c: c, kv: kv, bucket: kv.Bucket()}
	wctx, stop := context.WithCancel(ctx)
	w, err := kv.WatchAll(wctx)
	if err != nil {
		stop()
		return nil, err
	}
	rw.w, rw.stop = w, stop
	return rw, nil
}

// updates is the current watcher's entries; a nil entry marks the end of
// the values present when it started.
func (rw *rewatch) updates() <-chan jetstream.KeyValueEntry { return rw.w.Updates() }

// fresh reports whether e (not nil) is after the last entry delivered,
// and makes it the last: a new watcher starts where the old one ended,
// and an entry both had is skipped.
func (rw *rewatch) fresh(e jetstream.KeyValueEntry) bool {
	if e.Revision() <= rw.last {
		return false
	}
	rw.last = e.Revision()
	return true
}

// renew replaces the watcher by one from the revision after the last
// delivered, trying again until it can; false when ctx ended first.
func (rw *rewatch) renew(ctx context.Context) bool {
	rw.stop()
	delay := rewatchRetry
	for {
		wctx, stop := context.WithCancel(ctx)
		// The context is the subscription's life: the attempt alone is
		// bounded, by a timer stopped once it succeeds.
		bound := time.AfterFunc(rewatchTry, stop)
		w, err := rw.kv.WatchAll(wctx, jetstream.ResumeFromRevision(rw.last+1))
		if err == nil && bound.Stop() {
			rw.w, rw.stop = w, stop
			rw.c.log.Info("watching the bucket again after NATS came back", "bucket", rw.bucket, "from", rw.last+1)
			return true
		}
		stop()
		rw.c.log.Debug("cannot watch the bucket again yet", "bucket", rw.bucket, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay = min(2*delay, rewatchMaxRetry)
	}
}

// Stop ends the watch.
func (rw *rewatch) Stop() { rw.stop() }

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
