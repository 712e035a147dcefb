package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
// and reads it back, to take NATS's clock before anything is read: a
// deadline armed on a clock minutes off would fire at once, for the
// whole cluster. It is read back through a watch, as the heartbeats
// are (a direct get may be answered by a replica behind its leader),
// and tried again while NATS cannot serve it (untilServed); an instance
// that cannot take it does not start, as one that cannot read its
// buckets does not.
func (c *Cluster) readClock(ctx context.Context) error {
	return c.untilServed(ctx, "NATS's clock", func(ctx context.Context) error {
		sent := c.o.Clock()
		rev, err := c.insts.Put(ctx, c.o.Instance, c.beatValue(0))
		acked := c.o.Clock()
		if err != nil {
			return fmt.Errorf("write heartbeat: %w", err)
		}
		var stored time.Time
		if err := readPresent(ctx, c.insts, c.o.Instance, "the instance's heartbeat", func(e jetstream.KeyValueEntry) error {
			if e.Revision() == rev {
				stored = e.Created()
			}
			return nil
		}); err != nil {
			return err
		}
		if stored.IsZero() {
			return fmt.Errorf("heartbeat %d of instance %q written over at once (another instance of that name?)", rev, c.o.Instance)
		}
		c.heard(sent, acked, stored)
		return nil
	})
}
