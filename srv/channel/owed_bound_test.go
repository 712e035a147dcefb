package channel

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// scanNotes are a cluster's notes in memory: they list what is under a
// prefix, as srv/cluster's do.
type scanNotes struct{ *MemoryNotes }

func (n scanNotes) Scan(_ context.Context, prefix string, fn func([]byte) error) error {
	n.mu.Lock()
	var out [][]byte
	for k, v := range n.m {
		if strings.HasPrefix(k, prefix) && n.now().Before(v.until) {
			out = append(out, append([]byte(nil), v.value...))
		}
	}
	n.mu.Unlock()
	for _, v := range out {
		if err := fn(v); err != nil {
			return err
		}
	}
	return nil
}

// unreachable is a service out of reach: every post gets a 502.
type unreachable struct{ posts atomic.Int32 }

func (u *unreachable) RoundTrip(r *http.Request) (*http.Response, error) {
	u.posts.Add(1)
	return &http.Response{StatusCode: http.StatusBadGateway, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("bad gateway")), Request: r}, nil
}

// TestOwedPastTheBoundWaitForALaterScan: a cluster's lease holder
// finds more follow-ups owed than it tries at a time (maxOwed; ntfy out
// of reach for a day of questions). Those past the bound wait in their
// notes for a scan that finds room, said once a scan; a scan does not
// put off the ones already tried to make room for them (which the next
// scan would put back, putting off others: a warning for each, every
// scan, and the service asked again each time, whatever its backoff).
func TestOwedPastTheBoundWaitForALaterScan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		h := hub.New(hub.Options{})
		defer h.Close()
		notes := scanNotes{NewMemoryNotes(nil)}
		svc := &unreachable{}
		nt := &Ntfy{URL: "https://ntfy.example", Topic: "aa-topic", Client: &http.Client{Transport: svc}}
		room := store.Room(tokA)
		now := time.Now()
		const extra = 100
		for i := range maxOwed + extra {
			rec := sentRecord{Room: room, ID: "q-" + strconv.Itoa(i), Channel: nt.Name(), ReqKind: wire.AskQuestion,
				Kind: hub.TimedOut, At: now, Since: now}
			b, _ := json.Marshal(rec)
			if err := notes.Put(t.Context(), owedPrefix+sentNoteKey(room, rec.ID, 0, nt.Name()), b, now.Add(owedFor)); err != nil {
				t.Fatal(err)
			}
		}
		o := Options{Hub: h, Routes: map[string][]Channel{tokA: {nt}}, Notes: notes, Logger: log}
		o.owedScan = time.Minute
		m := New(o)
		defer m.Close()

		const scans = 4
		for range scans {
			time.Sleep(time.Minute)
			synctest.Wait()
		}
		if n := strings.Count(logs.String(), "put off"); n > 0 {
			t.Errorf("%d follow-ups owed put off for others, over %d scans, want none", n, scans)
		}
		if n := strings.Count(logs.String(), "level=WARN"); n > scans+1 {
			t.Errorf("%d warnings over %d scans, want one a scan at most:\n%.2000s", n, scans, logs.String())
		}
		// Each tried at first, then after its backoff (5 s, doubling):
		// by 4 minutes, at most 7 tries each; none asked again at every
		// scan on top of it.
		if got, most := int(svc.posts.Load()), maxOwed*7; got > most {
			t.Errorf("%d posts to the service out of reach, want at most %d", got, most)
		}
		m.owed.mu.Lock()
		tried := len(m.owed.items)
		m.owed.mu.Unlock()
		if tried != maxOwed {
			t.Errorf("%d follow-ups owed tried, want %d (the bound)", tried, maxOwed)
		}
	})
}
