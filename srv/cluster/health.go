package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
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
	// probeEvery spaces the round trips; probeTimeout bounds a round
	// trip made elsewhere to see whether NATS answers.
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

// tripped is the outcome of the n-th round trip of probe.
type tripped struct {
	n     uint64
	state jetstream.StreamState
	at    time.Time
	err   error
}

// maxProbes bounds the round trips of probe under way at once.
const maxProbes = int(unhealthyAfter/probeEvery) + 1

// probe starts a round trip (trip: roundTrip) to the requests bucket
// every probeEvery, each given until unhealthyAfter to answer, without
// waiting for the ones before: a NATS that answers every request after
// 2 or 3 s (loaded, far away) saves every write within the hub's time
// for it and is no reason to end the calls held here, and one request
// that gets no answer (dropped by a NATS too busy) does not hold up the
// next. Once none has succeeded for unhealthyAfter, it says so in the
// log and tells h (hub.LinkLost: the calls waiting here end as
// unavailable, so agents go to another instance); the first one back
// says that too. It waits for the round trips it started.
func (c *Cluster) probe(ctx context.Context, h *hub.Hub, w *rewatch, trip func(context.Context) (jetstream.StreamState, time.Time, error)) {
	c.mu.Lock()
	c.health.okAt = time.Now() // Open has just made a round trip
	c.mu.Unlock()
	var wg sync.WaitGroup
	defer wg.Wait()
	out := make(chan tripped, maxProbes) // never full: one place a round trip
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	var watch lag         // of w (rewatch.go)
	var sent, took uint64 // round trips started; the last whose state was taken
	under := 0            // round trips under way
	start := func() {
		if under == maxProbes {
			return
		}
		under++
		sent++
		n := sent
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, unhealthyAfter)
			state, at, err := trip(pctx)
			cancel()
			out <- tripped{n: n, state: state, at: at, err: err}
		})
	}
	start() // the first at once: its answer is due within unhealthyAfter of Open's
	for {
		var r tripped
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			start()
		case r = <-out:
			under--
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(r.err, jetstream.ErrStreamNotFound) || errors.Is(r.err, jetstream.ErrBucketNotFound) || errors.Is(r.err, errRemade) {
			c.storageLost(h, r.err)
			return
		}
		answered := r.n != 0 && r.err == nil
		now := time.Now()
		c.mu.Lock()
		switch {
		case answered:
			// when the stream last had a quorum, not when it answered
			if r.at.After(c.health.okAt) {
				c.health.okAt = r.at
			}
			c.health.problem = ""
		case r.n != 0:
			c.health.problem = r.err.Error()
		}
		// Lost on a round trip that failed (given until unhealthyAfter),
		// never on a tick alone: a process that did not run for seconds
		// (paused, starved of CPU) finds its round trips answered when
		// it runs again. Not before the answers already in are read: one
		// may be new.
		lose := r.n != 0 && r.err != nil && !c.health.lost && now.Sub(c.health.okAt) >= unhealthyAfter && len(out) == 0
		back := answered && c.health.lost && now.Sub(c.health.okAt) < unhealthyAfter
		if back {
			c.health.lost = false
		}
		since, problem := c.health.okAt, c.health.problem
		c.mu.Unlock()
		if answered && r.n > took {
			took = r.n
			if watch.behind(w.delivered.Load(), r.state.LastSeq, r.state.Msgs) {
				w.kick.Tell()
			}
		}
		switch {
		case lose:
			if problem == "" {
				problem = "no answer"
			}
			c.log.Error("NATS does not answer: this instance can save nothing; /health says unhealthy, and the agents' calls held here end so they go to another instance",
				"since", since.Format(time.RFC3339), "err", problem)
			// The calls held here end (as unavailable, to be asked again
			// elsewhere) as /health says so: a bridge that watches
			// /health and cuts its call on a 503 finds it ended already.
			h.LinkLost()
			c.mu.Lock()
			c.health.lost = true
			c.mu.Unlock()
		case back:
			c.log.Info("NATS answers again", "after", now.Sub(since).Round(time.Millisecond))
			h.LinkBack()
		}
	}
}

// errNoLeader: the requests' stream has no leader (a NATS cluster
// without its quorum): nothing can be saved, though a node answers.
var errNoLeader = errors.New("the requests bucket's stream has no leader (a NATS cluster without a quorum)")

// errRemade: the requests bucket is not the one this instance started
// on: NATS lost its storage while this instance could not reach it, and
// another instance, starting afresh, made the buckets again. Its
// records went with it, as when the bucket is found gone.
var errRemade = errors.New("the requests bucket was made again since this instance started (NATS lost its storage meanwhile)")

// quorumStale: a leader that has heard from too few of its replicas for
// this long is one that lost its quorum and does not know it yet (NATS
// lets it lead for 10 s more).
const quorumStale = 2 * time.Second

// roundTrip asks for the requests' stream info, which its leader
// answers, and returns the stream's state (for the check of the watch:
// lag) and when the stream last had a quorum, by its leader's account.
// Neither a member of a stream without a leader (it answers too, from
// its own copy, naming no leader) nor a leader that has lost its
// replicas (it answers as leader for 10 s more, while nothing it is
// given can be saved) is a round trip to anything that can save.
func (c *Cluster) roundTrip(ctx context.Context) (jetstream.StreamState, time.Time, error) {
	st, err := c.reqs.Status(ctx)
	now := time.Now()
	if err != nil {
		return jetstream.StreamState{}, time.Time{}, err
	}
	s, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || s.StreamInfo() == nil {
		return jetstream.StreamState{}, now, nil
	}
	si := s.StreamInfo()
	if c.epoch != "" && epochOf(si.Created) != c.epoch {
		return si.State, time.Time{}, errRemade
	}
	if si.Cluster == nil || len(si.Cluster.Replicas) == 0 {
		return si.State, now, nil // one server: nothing to agree with
	}
	if si.Cluster.Leader == "" {
		return si.State, time.Time{}, errNoLeader
	}
	at := now.Add(-quorumAge(si.Cluster.Replicas))
	if now.Sub(at) >= quorumStale {
		return si.State, at, fmt.Errorf("the requests bucket's leader %s has heard from too few of its replicas for %s (a NATS cluster without a quorum)",
			si.Cluster.Leader, now.Sub(at).Round(time.Millisecond))
	}
	return si.State, at, nil
}

// quorumAge is how long ago the leader last heard from as many replicas
// as make a quorum with it: of its 1+len(replicas) servers, a majority.
func quorumAge(replicas []*jetstream.PeerInfo) time.Duration {
	need := (1 + len(replicas)) / 2 // besides the leader, a majority of all
	ages := make([]time.Duration, 0, len(replicas))
	for _, r := range replicas {
		if r == nil || r.Offline {
			continue
		}
		ages = append(ages, r.Active)
	}
	if need <= 0 {
		return 0
	}
	if len(ages) < need {
		return time.Duration(math.MaxInt64)
	}
	slices.Sort(ages)
	return ages[need-1]
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

// Probe tries whether NATS takes writes again (hub.Prober): a value put
// into the presence bucket, in NATS's file storage as the requests', under
// a key no device has (applyPresence passes it by), and deleted; and
// whether the requests bucket, when given a limit of its own, has room
// for a record (probeRoom).
func (c *Cluster) Probe(ctx context.Context) error {
	k := "probe." + b64(c.o.Instance)
	_, err := c.roster.kv.Put(ctx, k, []byte("probe"))
	if err == nil {
		err = c.roster.kv.Delete(ctx, k)
	}
	if err != nil {
		return c.unreachable(err, PresenceBucket)
	}
	st, err := c.reqs.Status(ctx)
	if err != nil {
		return c.unreachable(err, RequestsBucket)
	}
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok {
		if limit := bs.StreamInfo().Config.MaxBytes; limit > 0 && st.Bytes()+probeRoom > uint64(limit) {
			return fmt.Errorf("NATS is out of storage: bucket %s is at its own limit (%d of %d bytes): %s", RequestsBucket, st.Bytes(), limit, raiseHelp(RequestsBucket))
		}
	}
	return nil
}

// probeRoom is the room a bucket with a limit of its own needs for the
// probe to pass: a record's, as a small write may fit where the next
// record does not.
const probeRoom = 4 << 10
