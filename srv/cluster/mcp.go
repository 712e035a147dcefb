package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// /mcp sessions across instances: what a client does on one instance to
// a session every instance may serve (a call's cancel, the session's
// end) is told to the others (mcphttp.Peers; what a note says, how it is
// signed and checked, is mcphttp's, peers.go), twice over:
//
//   - on the core subject aa.mcp, which every instance subscribes to:
//     at once, and while JetStream cannot store (a NATS cluster without
//     its quorum), but lost to an instance that is not connected at that
//     moment (its link cut, NATS restarting);
//   - in the bucket agentassistant_mcp_notes, which every instance
//     watches: an instance that missed the core message gets the note
//     once it is back (the watch goes on from the last revision it
//     had), so a cancelled call still ends and an ended session is not
//     served on; and an instance that starts within the bucket's age
//     learns the sessions ended before it.
//
// Each instance hears a note once: the second copy is skipped.

const mcpSubject = "aa.mcp"

// MCPNotesBucket keeps the notes for the instances that miss them.
const MCPNotesBucket = "agentassistant_mcp_notes"

const (
	// mcpNoteAge is how long a note is kept: longer than a call waits,
	// and what an instance that starts later refuses of ended sessions.
	mcpNoteAge = 24 * time.Hour
	// mcpNotesBytes bounds the bucket; a note it cannot take is still
	// told on the core subject.
	mcpNotesBytes = 64 << 20
	// mcpHeard is how many notes an instance remembers having heard, to
	// skip the second copy of each.
	mcpHeard = 1024
)

// fromHeader names the run of the instance a note comes from, which
// skips its own (Cluster.run): a restarted instance of the same name
// hears what its previous run told.
const fromHeader = "Aa-Instance"

// maxMCPNote bounds a note read; mcphttp bounds it again.
const maxMCPNote = 4096

// MCPPeers is the /mcp endpoint's link to the other instances
// (mcphttp.Peers).
type MCPPeers struct{ c *Cluster }

// MCP is the /mcp endpoint's link to the other instances.
func (c *Cluster) MCP() MCPPeers { return MCPPeers{c: c} }

func (c *Cluster) openMCPNotes(ctx context.Context) error {
	kv, err := c.openKV(ctx, jetstream.KeyValueConfig{Bucket: MCPNotesBucket,
		Description: "agentassistant /mcp cancels and session ends, for the instances that missed them", TTL: mcpNoteAge,
		MaxBytes: mcpNotesBytes, MaxValueSize: maxMCPNote + 512})
	if err != nil {
		return err
	}
	c.mcpNotes = kv
	return nil
}

// Tell sends note to the other instances. Best effort: a note neither
// the subject nor the bucket takes now is not sent later (the
// connection buffers nothing while it reconnects).
func (p MCPPeers) Tell(note []byte) {
	m := nats.NewMsg(mcpSubject)
	m.Header.Set(fromHeader, p.c.run)
	m.Data = note
	if err := p.c.nc.PublishMsg(m); err != nil {
		p.c.log.Warn("tell the other instances of an /mcp session", "err", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if _, err := p.c.mcpNotes.Put(ctx, mcpNoteKey(note), mcpNoteValue(p.c.run, note)); err != nil {
		p.c.log.Warn("keep an /mcp note for the instances that miss it", "err", err)
	}
}

// mcpNoteKey is a note's key: its digest, so that the same note told
// again takes the same key.
func mcpNoteKey(note []byte) string { return keyOf("n.", string(note)) }

// A kept note's value is the teller's run, a NUL, and the note.
func mcpNoteValue(run string, note []byte) []byte {
	return append(append([]byte(run), 0), note...)
}

func splitMCPNote(v []byte) (run string, note []byte) {
	i := bytes.IndexByte(v, 0)
	if i < 0 {
		return "", nil
	}
	return string(v[:i]), v[i+1:]
}

// Listen hands hear the notes of the other instances, one at a time,
// each once, until stop (or the connection's Close); those kept in the
// bucket before it returns. Goroutines: the
// subscription's, and one that reads the bucket's watch; stop ends both
// and waits.
func (p MCPPeers) Listen(hear func(note []byte)) (stop func(), err error) {
	var (
		mu    sync.Mutex // one note at a time, and guards heard
		heard = newHeardSet(mcpHeard)
	)
	once := func(note []byte) {
		if len(note) == 0 || len(note) > maxMCPNote {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if heard.add(sha256.Sum256(note)) {
			hear(note)
		}
	}
	sub, err := p.c.nc.Subscribe(mcpSubject, func(m *nats.Msg) {
		if m.Header.Get(fromHeader) != p.c.run {
			once(m.Data)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", mcpSubject, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := p.c.watchAll(ctx, p.c.mcpNotes)
	if err != nil {
		cancel()
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("watch bucket %s: %w", MCPNotesBucket, err)
	}
	var wg sync.WaitGroup
	initial := make(chan struct{})
	wg.Go(func() {
		follow(ctx, w, func() { close(initial) }, func(e jetstream.KeyValueEntry) {
			if from, note := splitMCPNote(e.Value()); e.Operation() == jetstream.KeyValuePut && note != nil && from != p.c.run {
				once(note)
			}
		})
	})
	// The notes kept are heard before the endpoint serves, so that an
	// instance started after a session ended refuses it from its first
	// request; a bucket slow to answer delays the start only so long.
	select {
	case <-initial:
	case <-time.After(rewatchTry):
		p.c.log.Warn("the /mcp notes kept are not all heard yet; serving meanwhile", "bucket", MCPNotesBucket)
	}
	return func() {
		_ = sub.Unsubscribe()
		cancel()
		_ = w.Stop()
		wg.Wait()
	}, nil
}

// heardSet remembers the last n notes heard, by digest: a ring.
type heardSet struct {
	seen map[[sha256.Size]byte]struct{}
	ring [][sha256.Size]byte
	next int // the ring's oldest slot once it is full
}

func newHeardSet(n int) *heardSet {
	return &heardSet{seen: make(map[[sha256.Size]byte]struct{}, n), ring: make([][sha256.Size]byte, 0, n)}
}

// add reports whether sum is new, remembering it.
func (s *heardSet) add(sum [sha256.Size]byte) bool {
	if _, ok := s.seen[sum]; ok {
		return false
	}
	if len(s.ring) < cap(s.ring) {
		s.ring = append(s.ring, sum)
	} else {
		delete(s.seen, s.ring[s.next])
		s.ring[s.next] = sum
		s.next = (s.next + 1) % len(s.ring)
	}
	s.seen[sum] = struct{}{}
	return true
}
