package cluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The requests bucket's revisions number the rooms' request events on
// every instance (hub's seq.go). The numbering is the bucket's
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

// lastRevision is the bucket's last revision.
func (c *Cluster) lastRevision(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.reqs.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("read bucket %s: %w", RequestsBucket, err)
	}
	kst, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return 0, fmt.Errorf("read bucket %s: unexpected status %T", RequestsBucket, st)
	}
	return kst.StreamInfo().State.LastSeq, nil
}
