package cluster

import (
	"context"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/srv/hub"
)

// The requests bucket's revisions number the rooms' request events on
// every instance (hub's sharedseq.go). The numbering is the bucket's
// stream's: its epoch is when that stream was created, the same for every
// instance, another if the bucket is made again from scratch.

// Epoch names the numbering of the requests bucket's revisions
// (hub.Shared).
func (c *Cluster) Epoch() string { return c.epoch }

// readEpoch reads the requests bucket's creation time.
func (c *Cluster) readEpoch(ctx context.Context) error {
	st, err := c.reqs.Status(ctx)
	if err != nil {
		return err
	}
	kst, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return nil
	}
	c.epoch = "c" + strconv.FormatInt(kst.StreamInfo().Created.UnixNano(), 36)
	return nil
}

// lastRevision is the bucket's last revision, 0 when NATS cannot say.
func (c *Cluster) lastRevision(ctx context.Context) (uint64, bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.reqs.Status(ctx)
	if err != nil {
		return 0, false
	}
	kst, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return 0, false
	}
	return kst.StreamInfo().State.LastSeq, true
}

// follows tells h, once the records present at Start are applied, from
// which revision its rings are complete. Until then (and when NATS cannot
// say) no device resumes here by number: it gets a full resync.
func (c *Cluster) follows(ctx context.Context, h *hub.Hub) {
	select {
	case <-c.ready:
	case <-ctx.Done():
		return
	}
	if last, ok := c.lastRevision(ctx); ok {
		h.Following(last)
	}
}
