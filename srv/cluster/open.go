package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/srv/hub"
)

// openWait bounds how long an instance waits for NATS to place a bucket
// it opens, openTry one try (a request that NATS leaves unanswered while
// its cluster re-forms); openRetry and openMaxRetry space the tries.
const (
	openWait     = time.Minute
	openTry      = 5 * time.Second
	openRetry    = 250 * time.Millisecond
	openMaxRetry = 5 * time.Second
)

// jsNoPeers is JetStream's "no suitable peers for placement": too few
// of the NATS cluster's nodes are up for the bucket's replicas.
const jsNoPeers = 10005

// jsStorageShort is JetStream's "insufficient storage resources
// available": the NATS server's file storage (max_file_store, by
// default most of its disk's free space when it started) cannot take
// what is asked, a bucket's reservation (its MaxBytes) or a write.
const jsStorageShort = 10047

// jsNoResources is JetStream's "insufficient resources": a write
// refused because its file storage is used up to max_file_store.
const jsNoResources = 10023

// jsStoreFailed is JetStream's "store failed": a write refused by the
// stream, as when its bucket is at its own limit ("maximum bytes
// exceeded": the MaxBytes an operator gave it).
const jsStoreFailed = 10077

// bucketFull says err is a write refused because its bucket is at its
// own limit of bytes or values.
func bucketFull(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jsStoreFailed && strings.Contains(api.Description, "maximum")
}

// raiseHelp is what gives bucket, at its own limit, room again.
func raiseHelp(bucket string) string {
	return "raise its limit (nats stream edit KV_" + bucket + " --max-bytes=…, or -1 for none) or free room in it"
}

// storageShort says err is JetStream refusing for want of storage.
func storageShort(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jsStorageShort
}

// jetStreamHelp is what gives a NATS server JetStream, which nats-server
// runs only when told to.
const jetStreamHelp = "is the NATS server running with JetStream (nats-server -js, or jetstream {} in its config; docs/cluster.md)?"

// storageHelp is what gives NATS the storage it lacks.
const storageHelp = "give the NATS server more JetStream storage (jetstream { max_file_store } in its config; by default 75% of its disk's free space when it started) or free space on its disk"

// openKV creates the bucket cfg names, or updates it to cfg, and returns
// once the bucket answers a read. Every bucket of the cluster keeps one
// value a key (History 1) on the replicas the options ask for; an error
// names the bucket. An instance started while a node of
// its NATS cluster is down or restarting, or before the cluster has
// formed, cannot place a bucket of three replicas yet, and a bucket just
// placed has for a moment no replica serving reads ("no responders"): it
// says so and tries again, for up to openWait (or ctx), rather than
// stop. Any other refusal (a setting NATS does not take) is returned at
// once.
func (c *Cluster) openKV(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	cfg.History, cfg.Replicas = 1, c.o.Replicas
	var kv jetstream.KeyValue
	err := c.untilServed(ctx, "bucket "+cfg.Bucket, func(ctx context.Context) error {
		var err error
		if kv, err = c.makeKV(ctx, cfg); err != nil {
			return err
		}
		if _, err = kv.Get(ctx, "opened"); errors.Is(err, jetstream.ErrKeyNotFound) {
			err = nil
		}
		return err
	})
	if storageShort(err) {
		reserves := ""
		if cfg.MaxBytes > 0 {
			reserves = fmt.Sprintf(", which reserves %d MiB on each of its %d replicas", cfg.MaxBytes>>20, max(cfg.Replicas, 1))
		}
		err = fmt.Errorf("NATS has not the storage for bucket %s%s (%w): %s, and start again", cfg.Bucket, reserves, err, storageHelp)
	}
	if err != nil {
		return nil, fmt.Errorf("open bucket %s (%d replicas): %w", cfg.Bucket, cfg.Replicas, err)
	}
	return kv, nil
}

// makeKV creates the bucket cfg names, or, when it exists with another
// configuration (made by an older release), updates it to cfg. Never
// create-or-update: JetStream leaves an update of a stream unanswered
// while another client's create of it is in flight, and that create
// too, so the instances of a deployment starting at once on a new NATS
// cluster each waited out a try (openTry) for every bucket. Creates of
// the same configuration at once all succeed.
func (c *Cluster) makeKV(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := c.js.CreateKeyValue(ctx, cfg)
	if storageShort(err) {
		// NATS checks a create's reservation before it finds the
		// bucket made already (by another instance): one that exists
		// is updated, which reserves nothing more.
		if _, lerr := c.js.KeyValue(ctx, cfg.Bucket); lerr == nil {
			err = jetstream.ErrBucketExists
		}
	}
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = c.js.UpdateKeyValue(ctx, cfg)
	}
	return kv, err
}

// untilServed runs try, of what, until it passes or fails for a reason
// other than NATS being out of reach or short of nodes for now, for up to
// openWait (or ctx); each try is bounded by openTry.
func (c *Cluster) untilServed(ctx context.Context, what string, try func(context.Context) error) (err error) {
	defer func() {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
			err = fmt.Errorf("%w: %s", err, jetStreamHelp)
		}
	}()
	deadline := time.Now().Add(openWait)
	wait := openRetry
	for {
		tctx, cancel := context.WithTimeout(ctx, openTry)
		err = try(tctx)
		cancel()
		if err == nil || !c.placeLater(err) || ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return err
		}
		attrs := []any{"what", what, "err", err, "retry_in", wait}
		// A NATS server answers "jetstream not enabled" for a moment
		// while it starts, and always when started without JetStream:
		// the log says what to check, and so does the error (above).
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
			attrs = append(attrs, "check", jetStreamHelp)
		}
		c.log.Warn("NATS cannot serve this yet (a node down or starting?); trying again", attrs...)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, openMaxRetry)
	}
}

// watchServed makes a watch at start with watch, trying again as
// untilServed does while NATS cannot serve it yet (a bucket just placed,
// its stream's leader not elected yet), up to ctx. The watch lives in
// a context of its own under life, which the returned stop ends: each
// try is bounded by openTry, the watch it makes is not.
func (c *Cluster) watchServed(ctx, life context.Context, what string, watch func(context.Context) (jetstream.KeyWatcher, error)) (jetstream.KeyWatcher, context.CancelFunc, error) {
	var w jetstream.KeyWatcher
	var stop context.CancelFunc
	err := c.untilServed(ctx, what, func(tctx context.Context) error {
		wctx, wstop := context.WithCancel(life)
		bound := context.AfterFunc(tctx, wstop)
		made, err := watch(wctx)
		if !bound() { // the try's bound passed first: what it made is cut
			wstop()
			if err == nil {
				err = tctx.Err()
			}
			return err
		}
		if err != nil {
			wstop()
			return err
		}
		w, stop = made, wstop
		return nil
	})
	return w, stop, err
}

// placeLater says err, from making a bucket, may pass: NATS is out of
// reach for now, or too few of its nodes are up to place the bucket.
func (c *Cluster) placeLater(err error) bool {
	var api *jetstream.APIError
	return errors.Is(c.unreachable(err, ""), hub.ErrUnreachable) || errors.As(err, &api) && api.ErrorCode == jsNoPeers
}
