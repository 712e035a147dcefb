// Package cluster runs several agentassistant-srv instances as one server
// over NATS JetStream (cluster mode, switched on by nats_url).
//
// What it keeps in JetStream, and why there: the requests (a key-value
// bucket, one key per request, so first-reply-wins is a compare-and-set on
// the key's revision, not a lock in one process; records.go), and each
// instance's heartbeat with its count of connections (a bucket whose
// entries expire, for /health's share; status.go), the devices online
// (presence.go; chat across instances: deliver.go). Every instance watches
// the requests bucket and applies each change to its hub in order
// (hub.Hub.Apply): that is how a question asked through one instance
// reaches the devices of all of them.
//
// Goroutines: Start starts the watcher of the requests bucket and the
// heartbeat; Close stops them and waits, then closes the connection.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Bucket names in JetStream.
const (
	RequestsBucket  = "agentassistant_requests"
	InstancesBucket = "agentassistant_instances"
)

// Options configure Open. URL is required.
type Options struct {
	// URL is the NATS server, or several comma-separated (nats://host:4222).
	URL string
	// Tokens are the server's tokens: records of other rooms are ignored.
	Tokens []string
	// Instance names this instance (default: a random ID).
	Instance string
	// Replicas is how many JetStream servers keep each bucket (default:
	// 3 when URL names several servers, a NATS cluster in which one may
	// fail; 1 for a single server).
	Replicas int
	// History is how long a request's record is kept (default 30 days).
	History time.Duration
	// Heartbeat is how often this instance says it is alive and how many
	// connections it has (default 2s); an instance not heard from for five
	// heartbeats is counted out.
	Heartbeat time.Duration
	// HistoryScan is the most request records one call of the history
	// view reads (default 10,000; history.go).
	HistoryScan int
	// HistoryBytes bounds each room's records in the requests bucket by
	// their bytes, as store.Options.HistoryBytes one server's (budget.go);
	// zero is no bound but History.
	HistoryBytes int64
	Logger       *slog.Logger // nil: discard
	// Clock is this machine's wall clock (nil: time.Now); Now corrects
	// it to NATS's (clock.go).
	Clock func() time.Time

	// historyBytes bounds a history page by its records' bytes (default
	// store.HistoryPageBytes, as one server's page; history.go).
	historyBytes int64
}

// Cluster is this instance's link to the others. Safe for concurrent use.
type Cluster struct {
	o     Options
	log   *slog.Logger
	nc    *nats.Conn
	js    jetstream.JetStream
	reqs  jetstream.KeyValue
	insts jetstream.KeyValue
	// mcpNotes keeps /mcp cancels and ends for the instances that miss
	// them (mcp.go).
	mcpNotes jetstream.KeyValue
	// run names this run of the instance: what it tells the others of
	// /mcp (mcp.go, mcpstream.go) it skips when it comes back, and only
	// that, so a restart under the same name hears what the run before
	// told.
	run   string
	rooms map[string]string // room digest -> token
	// roster: presence across instances (presence.go)
	roster *roster
	epoch  string // the numbering of the requests' revisions (epoch.go)
	// budget keeps each room's history within HistoryBytes (budget.go).
	budget *historyBudget

	stop     context.CancelFunc
	wg       sync.WaitGroup
	ready    chan struct{} // closed once the records present at Start are applied
	closing  sync.Once
	lost     chan struct{} // closed when NATS lost the storage (health.go)
	lostOnce sync.Once

	mu     sync.Mutex
	health health        // the last round trip to the requests bucket (health.go)
	back   chan struct{} // closed at the next reconnect (rewatch.go)
	local  func() int
	total  int // connections cluster-wide, at the last heartbeat
	alive  int // instances heard from
	beatAt time.Time

	// skew is NATS's clock less this machine's, in nanoseconds (clock.go).
	skew atomic.Int64
}

// Open connects to NATS and makes sure the buckets exist.
func Open(ctx context.Context, o Options) (*Cluster, error) {
	if o.Instance == "" {
		o.Instance = wire.NewID()[:12]
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
		if strings.Contains(o.URL, ",") {
			o.Replicas = 3
		}
	}
	opt.Default(&o.History, 30*24*time.Hour)
	opt.Default(&o.Heartbeat, 2*time.Second)
	opt.Default(&o.HistoryScan, historyDefaultScan)
	opt.Default(&o.historyBytes, store.HistoryPageBytes)
	opt.Logger(&o.Logger)
	opt.Clock(&o.Clock)
	c := &Cluster{o: o, log: o.Logger, run: wire.NewID(), rooms: make(map[string]string, len(o.Tokens)), ready: make(chan struct{}), back: make(chan struct{}), lost: make(chan struct{})}
	for _, t := range o.Tokens {
		c.rooms[store.Room(t)] = t
	}
	c.budget = newHistoryBudget(c, o.HistoryBytes)
	nc, err := nats.Connect(o.URL, nats.Name("agentassistant-srv "+o.Instance), nats.MaxReconnects(-1),
		// No publish waits in a buffer for a reconnect: a write is saved
		// or refused now, never landing later after its caller was told no.
		nats.ReconnectBufSize(-1),
		nats.ReconnectWait(250*time.Millisecond),
		// A link cut without a word (a partition, a dead peer) is noticed
		// within pingEvery × (maxPingsOut + 1), not nats.go's 4 minutes.
		nats.PingInterval(pingEvery), nats.MaxPingsOutstanding(maxPingsOut),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { c.log.Warn("NATS disconnected", "err", err) }),
		// What nats.go reports on its own (a watch's consumer gone while
		// NATS was away, a slow consumer) goes to the log, not to stderr.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			args := []any{"err", err}
			if sub != nil {
				args = append(args, "subject", sub.Subject)
			}
			c.log.Warn("NATS reported", args...)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.log.Info("NATS reconnected", "server", nc.ConnectedUrlRedacted())
			c.onReconnect()
		}))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", redactURLs(o.URL), err)
	}
	c.nc = nc
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("open JetStream: %w", err)
	}
	c.js = js
	if err := c.openBuckets(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	if err := c.readEpoch(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("read bucket %s: %w", RequestsBucket, err)
	}
	if err := c.readClock(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("read NATS's clock: %w", err)
	}
	return c, nil
}

// openBuckets makes sure the buckets exist, as Options say.
func (c *Cluster) openBuckets(ctx context.Context) error {
	var err error
	if c.reqs, err = c.openKV(ctx, jetstream.KeyValueConfig{Bucket: RequestsBucket,
		Description: "agentassistant requests, one key per request", TTL: c.o.History}); err != nil {
		return err
	}
	if c.insts, err = c.openKV(ctx, jetstream.KeyValueConfig{Bucket: InstancesBucket,
		Description: "agentassistant-srv instances alive, and their connections", TTL: 5 * c.o.Heartbeat,
		Storage: jetstream.MemoryStorage}); err != nil {
		return err
	}
	if err := c.openMCPNotes(ctx); err != nil {
		return err
	}
	return c.openPresence(ctx)
}

// Instance is this instance's name in the cluster.
func (c *Cluster) Instance() string { return c.o.Instance }

// Start follows the requests bucket into h and starts the heartbeat,
// which reports connections (this instance's count of connections).
// Wait for Ready before serving.
func (c *Cluster) Start(h *hub.Hub, connections func() int) error {
	ctx, stop := context.WithCancel(context.Background())
	start, err := c.lastRevision(ctx) // before the watch: epoch.go
	if err != nil {
		stop()
		return err
	}
	w, err := c.watchAll(ctx, c.reqs)
	if err != nil {
		stop()
		return fmt.Errorf("watch bucket %s: %w", RequestsBucket, err)
	}
	c.stop = stop
	c.mu.Lock()
	c.local = connections
	c.mu.Unlock()
	// Every change, in order (after a reconnect too: w is a rewatch);
	// the records present at Start all in, the instance may serve.
	c.wg.Go(func() {
		follow(ctx, w, func() { h.Following(start); close(c.ready) }, func(e jetstream.KeyValueEntry) { c.apply(h, e) })
	})
	c.wg.Go(func() { c.beat(ctx) })
	c.wg.Go(func() { c.probe(ctx, h, w, c.roundTrip) })
	if c.budget.on() {
		c.wg.Go(func() { c.budget.run(ctx, h.Keeps()) })
	}
	return c.startRooms(ctx, h)
}

// Ready is closed once the records present at Start are applied.
func (c *Cluster) Ready() <-chan struct{} { return c.ready }

// apply applies e, a change of the requests bucket heard in order, to h.
func (c *Cluster) apply(h *hub.Hub, e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		// Deleted or purged (a cleared history, a record past its
		// age): history the hub no longer needs, unless the
		// record's settling was not heard here (forget).
		c.budget.heard(e, nil)
		c.forget(h, e)
		return
	}
	rec, err := decodeAt(e.Key(), e.Value())
	if err != nil {
		c.budget.heard(e, nil)
		c.log.Error("unreadable request record", "key", e.Key(), "err", err)
		return
	}
	c.budget.heard(e, &rec)
	token, ok := c.rooms[rec.Room]
	if !ok {
		return // another deployment's token
	}
	h.Apply(token, rec, e.Revision())
}

// forget tells h of the deletion e of a request's record: one h still
// holds pending was settled, then deleted, while this instance did not
// hear it.
func (c *Cluster) forget(h *hub.Hub, e jetstream.KeyValueEntry) {
	room, id, ok := splitKey(e.Key())
	if !ok {
		return
	}
	if token, ok := c.rooms[room]; ok {
		h.Forget(token, id, e.Revision())
	}
}

// Close stops the watcher and the heartbeat, waits for them, and closes
// the connection. Idempotent.
func (c *Cluster) Close() error {
	c.closing.Do(func() {
		if c.stop != nil {
			c.stop()
		}
		c.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = c.forgetOwn(ctx) // its devices are gone with it
		_ = c.insts.Delete(ctx, c.o.Instance)
		cancel()
		c.nc.Close()
	})
	return nil
}

// The hub's Shared store.

// Create saves a new request record.
func (c *Cluster) Create(ctx context.Context, rec hub.SharedRecord) (uint64, error) {
	return c.write(ctx, rec, 0, true)
}

// Get reads a request record.
func (c *Cluster) Get(ctx context.Context, room, id string) (hub.SharedRecord, uint64, error) {
	k, ok := keyed(room, id)
	if !ok {
		return hub.SharedRecord{}, 0, fmt.Errorf("read request record: %w: an ID of %d bytes", hub.ErrRecordMissing, len(id))
	}
	e, err := c.reqs.Get(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return hub.SharedRecord{}, 0, fmt.Errorf("read request record: %w: %w", hub.ErrRecordMissing, err)
	}
	if err != nil {
		return hub.SharedRecord{}, 0, fmt.Errorf("read request record: %w", c.unreachable(err, RequestsBucket))
	}
	rec, err := decodeAt(e.Key(), e.Value())
	if err != nil {
		return hub.SharedRecord{}, 0, err
	}
	return rec, e.Revision(), nil
}

// Update replaces a request record if it is still at revision rev.
func (c *Cluster) Update(ctx context.Context, rec hub.SharedRecord, rev uint64) (uint64, error) {
	return c.write(ctx, rec, rev, false)
}

// write creates rec or writes it over revision rev, and returns its new
// revision. An update at revision 0 makes nothing, as the local records'
// (no record is at 0; a deleted one is not made again).
func (c *Cluster) write(ctx context.Context, rec hub.SharedRecord, rev uint64, create bool) (uint64, error) {
	k, ok := keyed(rec.Room, rec.ID)
	if !ok {
		return 0, fmt.Errorf("write request record: an ID of %d bytes has no key", len(rec.ID))
	}
	b, err := encode(rec)
	if err != nil {
		return 0, err
	}
	var n uint64
	switch {
	case create:
		if n, err = c.reqs.Create(ctx, k, b); errors.Is(err, jetstream.ErrKeyExists) {
			return 0, hub.ErrRecordExists
		}
	case rev == 0:
		return 0, hub.ErrRecordChanged // no record is at revision 0
	default:
		if n, err = c.reqs.Update(ctx, k, b, rev); errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, hub.ErrRecordChanged
		}
	}
	if err != nil {
		return 0, fmt.Errorf("write request record: %w", c.unreachable(err, RequestsBucket))
	}
	c.budget.wrote(rec.Room, k, len(k)+len(b), n)
	return n, nil
}

// unreachable wraps err, from a call to NATS, in hub.ErrUnreachable when
// it says NATS is away for now: the connection is down or reconnecting
// (no write waits for a reconnect: ReconnectBufSize), or JetStream did not
// answer or is not back yet after a restart. Refused for want of storage
// (NATS's, or bucket's own limit), it says what to raise. A record
// larger than max_payload is hub.ErrTooLarge. Anything else is returned
// as it is.
func (c *Cluster) unreachable(err error, bucket string) error {
	var api *jetstream.APIError
	switch {
	case bucketFull(err):
		// Its bucket is at the limit an operator gave it (JetStream
		// answers 503, yet it is not away): refused at once, as NATS
		// out of storage is.
		return fmt.Errorf("NATS is out of storage: bucket %s is at its own limit (%w): %s", bucket, err, raiseHelp(bucket))
	case errors.As(err, &api) && (api.ErrorCode == jsNoResources || api.ErrorCode == jsStorageShort):
		// NATS's file storage is used up (max_file_store): not away,
		// and no other instance saves more; refused to the caller at
		// once (ResourceExhausted). NATS takes writes again once space
		// is freed, no restart.
		return fmt.Errorf("NATS is out of storage (%w): %s", err, storageHelp)
	case errors.Is(err, nats.ErrMaxPayload):
		return fmt.Errorf("%w (raise max_payload in the NATS config): %w", hub.ErrTooLarge, err)
	case c.nc.IsConnected() && (errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrNoStreamResponse)):
		// Connected, and not answered: a NATS cluster without its
		// quorum, or a NATS server whose disk filled (its file store
		// takes no write to the stream until it restarts).
		return fmt.Errorf("%w: connected, but NATS did not answer in time (%w): a NATS cluster without its quorum, or its JetStream storage full (its log says \"Critical write error\"; %s, then restart it)",
			hub.ErrUnreachable, err, storageHelp)
	case !c.nc.IsConnected(),
		errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.As(err, &api) && api.Code == 503:
		return fmt.Errorf("%w: %w", hub.ErrUnreachable, err)
	}
	return err
}

// redactURLs is a comma-separated list of NATS URLs without their
// passwords, for messages.
func redactURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}
