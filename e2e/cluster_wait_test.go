package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/internal/wstest"
	srvcluster "github.com/agentassistant/agentassistant/srv/cluster"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Waiting for a cluster's state rather than for a while: each helper
// tries until the state is there, and fails after many tries, each one
// bounded, so a slow machine makes a test slower, not wrong.

// waitHeard waits until the instance s has applied the change of the
// requests bucket numbered rev: a device resuming there from rev is
// resumed once it has (the instance waits, up to its catch-up window, for
// a change a device saw elsewhere, and resyncs the device when it has
// not heard it yet; then the probe tries again).
func waitHeard(t *testing.T, s *server, epoch string, rev uint64) {
	t.Helper()
	for try := 0; ; try++ {
		if try == 60 {
			t.Fatalf("the instance never heard the change %d", rev)
		}
		c, err := wstest.DialResume(s.URL, tokenA, "probe", nil, epoch, rev)
		if err != nil {
			t.Fatal(err)
		}
		resumed := c.Login.GetResumed()
		c.Close()
		if resumed {
			return
		}
	}
}

// logged reports whether a line of s's log holds every one of parts.
func logged(s *server, parts ...string) bool {
	for line := range strings.Lines(s.logw.String()) {
		if allIn(line, parts) {
			return true
		}
	}
	return false
}

// waitLog waits until a line of s's log holds every one of parts.
func waitLog(t *testing.T, s *server, parts ...string) {
	t.Helper()
	for try := 0; !logged(s, parts...); try++ {
		if try == 1000 {
			t.Fatalf("the server never logged %q", parts)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func allIn(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// waitRecord waits until tokenA's request record id, read straight from
// the cluster's NATS, satisfies ok, and returns its revision.
func waitRecord(t *testing.T, js jetstream.JetStream, id string, ok func(store.Record) bool) uint64 {
	t.Helper()
	for try := 0; ; try++ {
		if rec, rev, found := readRecord(t, js, id); found && ok(rec) {
			return rev
		}
		if try == 1000 {
			t.Fatalf("the record %s never reached the state wanted", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readRecord reads tokenA's request record id from the cluster's NATS;
// found is false while there is none (or NATS is not back).
func readRecord(t *testing.T, js jetstream.JetStream, id string) (rec store.Record, rev uint64, found bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, srvcluster.RequestsBucket)
	if err != nil {
		return rec, 0, false
	}
	e, err := kv.Get(ctx, "r."+store.Room(tokenA)+"."+base64.RawURLEncoding.EncodeToString([]byte(id)))
	if err != nil {
		return rec, 0, false
	}
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		t.Fatal(err)
	}
	return rec, e.Revision(), true
}
