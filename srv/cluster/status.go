package cluster

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// beat is an instance's heartbeat in the instances bucket.
type beat struct {
	Connections int       `json:"connections"`
	At          time.Time `json:"at"`
	// Run names this run of the instance (Cluster.run): the closes of
	// pushes it holds name it (pushclose.go).
	Run string `json:"run,omitempty"`
}

// beat says every Heartbeat that this instance is alive and how many
// connections it has, and counts those of the instances alive.
func (c *Cluster) beat(ctx context.Context) {
	t := time.NewTicker(c.o.Heartbeat)
	defer t.Stop()
	for {
		c.beatOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Cluster) beatOnce(ctx context.Context) {
	// Two beats' time: a NATS that answers after 2 or 3 s (loaded, far
	// away) still has each heartbeat written within the 5 beats it
	// lives, though the count that follows may be cut short.
	ctx, cancel := context.WithTimeout(ctx, 2*c.o.Heartbeat)
	defer cancel()
	c.mu.Lock()
	local := c.local
	c.mu.Unlock()
	n := 0
	if local != nil {
		n = local()
	}
	b := c.beatValue(n)
	sent := c.o.Clock()
	rev, err := c.insts.Put(ctx, c.o.Instance, b)
	acked := c.o.Clock()
	if err != nil {
		c.log.Debug("heartbeat not written", "err", err)
		return
	}
	total, alive := 0, 0
	if readPresent(ctx, c.insts, jetstream.AllKeys, "the instances", func(e jetstream.KeyValueEntry) error {
		if e.Key() == c.o.Instance && e.Revision() == rev {
			c.heard(sent, acked, e.Created()) // clock.go
		}
		var hb beat
		if json.Unmarshal(e.Value(), &hb) == nil {
			total += hb.Connections
			alive++
		}
		return nil
	}) != nil {
		return
	}
	c.mu.Lock()
	c.total, c.alive, c.beatAt = total, alive, time.Now()
	c.mu.Unlock()
}

// beatValue is this instance's heartbeat with n connections.
func (c *Cluster) beatValue(n int) []byte {
	b, _ := json.Marshal(beat{Connections: n, At: c.Now(), Run: c.run})
	return b
}

// Status is what /health says of the cluster.
type Status struct {
	Mode     string `json:"mode"` // "cluster"
	Instance string `json:"instance"`
	// NATS is the connection's state: CONNECTED, RECONNECTING, ...
	NATS string `json:"nats"`
	// Connections here, cluster-wide (at the last heartbeat), and this
	// instance's share of them (0 to 1).
	Connections        int     `json:"connections"`
	ClusterConnections int     `json:"clusterConnections"`
	Share              float64 `json:"share"`
	Instances          int     `json:"instances"`
	// Healthy: a round trip to the requests bucket succeeded within the
	// last few seconds (health.go); Problem says why not.
	Healthy bool   `json:"healthy"`
	Problem string `json:"problem,omitempty"`
}

// Status reports this instance's place in the cluster.
func (c *Cluster) Status() Status {
	c.mu.Lock()
	local, total, alive := c.local, c.total, c.alive
	c.mu.Unlock()
	s := Status{Mode: "cluster", Instance: c.o.Instance, NATS: c.nc.Status().String(), ClusterConnections: total, Instances: alive}
	s.Healthy, s.Problem = c.healthy()
	if local != nil {
		s.Connections = local()
	}
	if total > 0 {
		s.Share = float64(s.Connections) / float64(total)
	}
	return s
}
