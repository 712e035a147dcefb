package cluster

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/srv/hub"
)

// Whether this instance can save anything now: a real round trip to the
// requests bucket's stream, not the state of the connection alone. A
// NATS cluster that lost its quorum, a bucket that is gone, or a link cut
// without a word all leave the connection looking up while nothing can
// be written.
//
// Goroutine: probe, started by Start, stopped by Close.

const (
	// pingEvery and maxPingsOut: nats.go's own check of the link.
	pingEvery   = time.Second
	maxPingsOut = 3
	// probeEvery spaces the round trips; probeTimeout bounds one.
	probeEvery   = time.Second
	probeTimeout = 2 * time.Second
	// unhealthyAfter without a round trip, the instance is unhealthy:
	// /health answers 503 within five seconds of the loss.
	unhealthyAfter = 4 * time.Second
)

// health is the probe's finding, guarded by Cluster.mu.
type health struct {
	okAt    time.Time // the last round trip that succeeded
	lost    bool      // told: the link is lost (logged, the hub told)
	problem string    // the last round trip's error
}

// probe makes a round trip to the requests bucket every probeEvery. The
// first one that finds the store unreachable for unhealthyAfter says so
// in the log and tells h (hub.LinkLost: the calls waiting here end as
// unavailable, so agents go to another instance); the first one back
// says that too.
func (c *Cluster) probe(ctx context.Context, h *hub.Hub) {
	c.mu.Lock()
	c.health.okAt = time.Now() // Open has just made a round trip
	c.mu.Unlock()
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := c.roundTrip(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) {
			c.storageLost(h, err)
			return
		}
		now := time.Now()
		c.mu.Lock()
		if err == nil {
			c.health.okAt, c.health.problem = now, ""
		} else {
			c.health.problem = err.Error()
		}
		lose := err != nil && !c.health.lost && now.Sub(c.health.okAt) >= unhealthyAfter
		back := err == nil && c.health.lost
		if lose || back {
			c.health.lost = lose
		}
		since := c.health.okAt
		c.mu.Unlock()
		switch {
		case lose:
			c.log.Error("NATS does not answer: this instance can save nothing; /health says unhealthy, and the agents' calls held here end so they go to another instance",
				"since", since.Format(time.RFC3339), "err", err)
			h.LinkLost()
		case back:
			c.log.Info("NATS answers again", "after", now.Sub(since).Round(time.Millisecond))
			h.LinkBack()
		}
	}
}

// errNoLeader: the requests' stream has no leader (a NATS cluster
// without its quorum): nothing can be saved, though a node answers.
var errNoLeader = errors.New("the requests bucket's stream has no leader (a NATS cluster without a quorum)")

// roundTrip asks for the requests' stream info, which its leader
// answers. A member of a stream that has had no leader for a while
// answers too, from its own copy and with no leader named: that is no
// round trip to anything that can save.
func (c *Cluster) roundTrip(ctx context.Context) error {
	st, err := c.reqs.Status(ctx)
	if err != nil {
		return err
	}
	if s, ok := st.(*jetstream.KeyValueBucketStatus); ok {
		if si := s.StreamInfo(); si != nil && si.Cluster != nil && si.Cluster.Leader == "" {
			return errNoLeader
		}
	}
	return nil
}

// healthy reports whether the last round trip is recent and the
// connection up, and what is wrong when not.
func (c *Cluster) healthy() (bool, string) {
	c.mu.Lock()
	okAt, problem := c.health.okAt, c.health.problem
	c.mu.Unlock()
	switch {
	case !c.nc.IsConnected():
		return false, "not connected to NATS (" + c.nc.Status().String() + ")"
	case !okAt.IsZero() && time.Since(okAt) >= unhealthyAfter:
		if problem == "" {
			problem = "no answer"
		}
		return false, "NATS has not answered for " + time.Since(okAt).Round(time.Second).String() + ": " + problem
	}
	return true, ""
}

// storageLost: NATS answers but the requests bucket is gone (NATS was
// started again without its storage, or the bucket was deleted). Every
// record in it is lost; this instance's numbering of events and its
// watch follow a stream that is no more. It says what is lost (the
// requests it knew pending), and closes Lost: agentassistant-srv starts
// afresh, which makes the buckets again, and the agents whose calls wait
// re-attach and ask again.
func (c *Cluster) storageLost(h *hub.Hub, err error) {
	lost := h.PendingIDs()
	c.log.Error("NATS lost the cluster's storage: the requests bucket is gone, and with it every request it held; this instance starts afresh, making the buckets again, and agents still waiting ask again",
		"err", err, "lost_pending", len(lost), "lost_ids", strings.Join(lost, ","))
	c.lostOnce.Do(func() { close(c.lost) })
}

// Lost is closed when NATS has lost the cluster's storage: the instance
// must start afresh (storageLost).
func (c *Cluster) Lost() <-chan struct{} { return c.lost }
