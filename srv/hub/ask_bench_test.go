package hub

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// answerer is a device that answers every question it is shown, one
// after another, as a /ws connection's reader does: its notes are
// queued by Send and read by the goroutine of run.
type answerer struct {
	id      string
	notes   chan *Note
	quit    chan struct{}
	dropped atomic.Int64
}

func (a *answerer) ID() string             { return a.id }
func (a *answerer) Nickname() string       { return a.id }
func (a *answerer) ConnectedAt() time.Time { return time.Time{} }

func (a *answerer) Send(n *Note) bool {
	select {
	case a.notes <- n:
		return true
	default:
		a.dropped.Add(1)
		return false
	}
}

// run answers the questions of token until quit is closed.
func (a *answerer) run(h *Hub, token string) {
	for {
		var n *Note
		select {
		case n = <-a.notes:
		case <-a.quit:
			return
		}
		if n.Kind != NoteAsked || n.Request.Kind != wire.AskQuestion {
			continue
		}
		id := n.Request.ID
		if err := h.Answer(context.Background(), token, wire.AskQuestion, id, Reply{ClientID: a.id}); err != nil {
			panic(fmt.Sprintf("answer %s: %v", id, err))
		}
	}
}

// BenchmarkAskConcurrent measures the single-process server's throughput
// of ask_question under 64 concurrent callers, over a real store (the
// journal in a temporary directory): every question and every answer is
// saved before anyone hears of it. Each room has one device that answers
// every question, as make bench's answerer does; rooms=1 is make bench's
// "64 callers" step, rooms=64 one caller per room. One op is one question
// asked and answered. Run: go test ./srv/hub -run '^$' -bench AskConcurrent -cpu 1,2
func BenchmarkAskConcurrent(b *testing.B) {
	lockorder.Pause(b)
	for _, rooms := range []int{1, 64} {
		b.Run(fmt.Sprintf("rooms=%d", rooms), func(b *testing.B) {
			db, err := store.Open(b.TempDir(), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			h := New(Options{Store: db})
			var devices sync.WaitGroup
			as := make([]*answerer, rooms)
			for i := range as {
				as[i] = &answerer{id: fmt.Sprint("device", i), notes: make(chan *Note, 4096), quit: make(chan struct{})}
				token := fmt.Sprint("token", i)
				h.Join(token, as[i], nil, Resume{})
				devices.Go(func() { as[i].run(h, token) })
			}
			const callers = 64
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			cpu0 := cpuTime(b)
			for c := range callers {
				token := fmt.Sprint("token", c%rooms)
				wg.Go(func() {
					for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
						_, err := h.Ask(context.Background(), token, Request{Kind: wire.AskQuestion, ID: fmt.Sprint("q", n), Text: "q?", Timeout: time.Minute})
						if err != nil {
							panic(fmt.Sprintf("ask: %v", err))
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			// The CPU the process spent per op, its garbage collection's
			// too: on a shared machine a steadier figure than the time.
			b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			h.Close()
			for _, a := range as {
				close(a.quit)
			}
			devices.Wait()
			for _, a := range as {
				if n := a.dropped.Load(); n > 0 {
					b.Fatalf("%s dropped %d notes", a.id, n)
				}
			}
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
