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
	kst, err := c.status(ctx)
	if err != nil || kst == nil {
		return err
	}
	c.epoch = epochOf(kst.StreamInfo().Created)
	return nil
}

// epochOf is the epoch of a requests bucket whose stream was created
// then.
func epochOf(created time.Time) string {
	return "c" + strconv.FormatInt(created.UnixNano(), 36)
}

// status reads the requests bucket's stream info, at start: right after
// the bucket is opened its stream may have no leader to answer yet, so
// it is read again while NATS cannot serve it (untilServed). Nil when
// the bucket says nothing of its stream.
func (c *Cluster) status(ctx context.Context) (*jetstream.KeyValueBucketStatus, error) {
	var kst *jetstream.KeyValueBucketStatus
	err := c.untilServed(ctx, "the status of bucket "+RequestsBucket, func(ctx context.Context) error {
		st, err := c.reqs.Status(ctx)
		if err != nil {
			return err
		}
		kst, _ = st.(*jetstream.KeyValueBucketStatus)
		return nil
	})
	return kst, err
}

// lastRevision is the bucket's last revision.
func (c *Cluster) lastRevision(ctx context.Context) (uint64, error) {
	kst, err := c.status(ctx)
	if err != nil {
		return 0, fmt.Errorf("read bucket %s: %w", RequestsBucket, err)
	}
	if kst == nil {
		return 0, fmt.Errorf("read bucket %s: no status of its stream", RequestsBucket)
	}
	return kst.StreamInfo().State.LastSeq, nil
}
