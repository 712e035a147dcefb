package cluster

import (
	"context"
	"fmt"
	"time"
)

// The cluster's clock. Instances write wall times the others read: a
// question's deadline (armed on every instance), a channel note's end,
// and they read NATS's own (when a claim or a close was stored). A host
// whose clock is off by minutes would time other instances' questions
// out at once, or never while its peers live; take a claim made a
// moment ago as stale; drop notes still needed. So every such time is
// on NATS's clock, as near as this instance can tell it: each write of
// its heartbeat, stored by NATS at a time NATS stamps on it, bounds
// NATS's clock less this one's between the stamp less the moment the
// write was acknowledged and the stamp less the moment it was sent.
// The offset kept is moved only as far as needed into those bounds, so
// it changes by no more than a round trip's length when the clocks
// agree, and by the difference at once when they do not.
//
// In a NATS cluster the stamp is the stream leader's: NATS servers
// should share a clock (NTP), as they need to for their own TTLs.

// skewLogged is the change of the offset that is logged.
const skewLogged = time.Second

// Now is the time of the cluster: this machine's clock (Options.Clock)
// corrected by how far NATS's differs from it. agentassistant-srv's
// hub, channels and pushes take their time from here in cluster mode.
func (c *Cluster) Now() time.Time {
	return c.o.Clock().Add(time.Duration(c.skew.Load()))
}

// heard corrects the offset by one write of this instance that it sent
// at sent and saw acknowledged at acked, by this machine's clock, and
// that NATS stamped stored.
func (c *Cluster) heard(sent, acked, stored time.Time) {
	lo, hi := stored.Sub(acked), stored.Sub(sent)
	if hi < lo {
		return // the machine's clock stepped back meanwhile
	}
	was := time.Duration(c.skew.Load())
	now := min(max(was, lo), hi)
	if now == was || !c.skew.CompareAndSwap(int64(was), int64(now)) {
		return
	}
	if d := now - was; d >= skewLogged || d <= -skewLogged {
		c.log.Warn("this machine's clock differs from NATS's: times shared with other instances (deadlines, leases, claims) are taken on NATS's",
			"natsAhead", now.Round(time.Millisecond).String())
	}
}

// readClock writes this instance's heartbeat (with no connections yet)
// and reads it back, to take NATS's clock before anything is read.
func (c *Cluster) readClock(ctx context.Context) error {
	b := c.beatValue(0)
	sent := c.o.Clock()
	rev, err := c.insts.Put(ctx, c.o.Instance, b)
	acked := c.o.Clock()
	if err != nil {
		return fmt.Errorf("write heartbeat: %w", err)
	}
	e, err := c.insts.Get(ctx, c.o.Instance)
	if err != nil {
		return fmt.Errorf("read heartbeat: %w", err)
	}
	if e.Revision() == rev {
		c.heard(sent, acked, e.Created())
	}
	return nil
}
