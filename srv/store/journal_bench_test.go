package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkAck settles whether the journal earns its place: the time
// until a record put by one of several concurrent callers is saved, (a)
// through the journal (Put, then Wait; and Stage, then Wait, as the
// server does it: the waiting caller appends), and (b) the
// same records committed straight into bbolt, batched as bbolt's own
// DB.Batch gathers concurrent callers into one transaction (and, for
// reference, one bbolt transaction per record), with the same
// options (no fsync unless Options.Sync), on the same disk, in the same
// run. Run: go test ./srv/store -run '^$' -bench Ack -benchtime 2s
func BenchmarkAck(b *testing.B) {
	lockorder.Pause(b)
	rec := func(i int64) Record {
		return Record{Room: "room", ID: fmt.Sprint("r", i), Kind: 1, Text: "Which database should the service use?",
			TimeoutSeconds: 600, CreatedAt: time.Unix(1700000000, 0), Deadline: time.Unix(1700000600, 0)}
	}
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprintf("journal/callers=%d", callers), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var n atomic.Int64
			run(b, callers, func() error { return s.Put(rec(n.Add(1))).Wait() })
		})
		b.Run(fmt.Sprintf("journal-staged/callers=%d", callers), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var n atomic.Int64
			run(b, callers, func() error { return s.Stage(rec(n.Add(1))).Wait() })
		})
		b.Run(fmt.Sprintf("bbolt-by-the-writer/callers=%d", callers), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.direct = true // the writer commits each batch it gathers, as the journal would take it
			var n atomic.Int64
			run(b, callers, func() error { return s.Put(rec(n.Add(1))).Wait() })
		})
		b.Run(fmt.Sprintf("bbolt-update/callers=%d", callers), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var n atomic.Int64
			run(b, callers, func() error { return s.write(entries([]Record{rec(n.Add(1))})) })
		})
		b.Run(fmt.Sprintf("bbolt-batch/callers=%d", callers), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var n atomic.Int64
			run(b, callers, func() error {
				r := rec(n.Add(1))
				es := entries([]Record{r})
				return s.db.Batch(func(tx *bolt.Tx) error {
					_, _, err := putEntries(tx, es, 0, nil)
					return err
				})
			})
		})
	}
}

// run calls fn b.N times from callers goroutines.
func run(b *testing.B, callers int, fn func() error) {
	b.ResetTimer()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := fn(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
