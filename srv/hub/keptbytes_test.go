package hub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// imageReply is an answer carrying an image of n bytes of its own (not
// shared with another answer's), as a phone's screenshot is.
func imageReply(i, n int) Reply {
	data := strings.Repeat(string(rune('A'+i%26)), n)
	return Reply{ClientID: "phone", Nickname: "phone", Contents: []*pb.McpResultContent{{Type: 2, Image: &pb.ImageContent{Type: "image", Data: data, MimeType: "image/png"}}}}
}

// replyHeld is what rep holds: its texts and images.
func replyHeld(rep *Reply) int64 {
	if rep == nil {
		return 0
	}
	var n int
	for _, c := range rep.Contents {
		n += len(c.GetText().GetText()) + len(c.GetImage().GetData()) + len(c.GetAudio().GetData()) + len(c.GetEmbeddedResource().GetData())
	}
	return int64(n)
}

// missedHeld is what r holds for absent agents, read from the answers
// themselves rather than from any count the hub keeps.
func missedHeld(h *Hub, r *room) (n int64, ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range r.missedOrder {
		m := r.missed[id]
		n += int64(len(m.p.req.Text)) + replyHeld(m.reply)
		ids = append(ids, id)
	}
	return n, ids
}

// settledHeld is what r holds for re-attaching callers.
func settledHeld(r *room) (n int64, count int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.settled {
		n += replyHeld(s.reply)
	}
	return n, len(r.settled)
}

// recordsHeld is what the local records hold of settled requests: their
// texts and encoded answers.
func recordsHeld(h *Hub) int64 {
	if h.local == nil {
		return 0
	}
	h.local.mu.Lock()
	defer h.local.mu.Unlock()
	var n int64
	for _, e := range h.local.recs {
		if e.rec.Status != store.Pending {
			n += int64(len(e.rec.Text) + len(e.rec.Reply) + len(e.rec.Questions))
		}
	}
	return n
}

// TestMissedBytesBounded: the answers a room keeps for absent agents are
// bounded by their bytes, not only by their count: a token's answers of
// 1 MiB each, twenty of them, leave at most MissedBytes kept, in the
// room and in the records behind it, one process or a cluster's
// instance; the newest stay and are handed over.
func TestMissedBytesBounded(t *testing.T) {
	const size = 1 << 20
	for _, cluster := range []bool{false, true} {
		t.Run(fmt.Sprint("cluster=", cluster), func(t *testing.T) {
			now := time.Unix(1000, 0)
			o := Options{Now: func() time.Time { return now }}
			var b *bus
			if cluster {
				b = newBus()
				o.Shared = b
			}
			var budget int64
			var recs []store.Record
			for i := range 20 {
				rep := imageReply(i, size)
				rec := store.Record{ID: fmt.Sprint("m", i), Kind: int(wire.AskQuestion), ProjectDirectory: "/p", Text: fmt.Sprintf("q m%d?", i),
					Status: store.Answered, Reply: encodeReply(&rep), ClosedAt: now.Add(time.Duration(i) * time.Second), ClosedNote: ReasonUndelivered}
				recs = append(recs, rec)
				budget = max(budget, int64(len(rec.Text)+len(rec.Reply)))
			}
			budget = 5*budget + budget/2 // the newest five fit, not six
			o.MissedBytes = budget
			h := New(o)
			defer h.Close()
			r := h.room("tok")
			n := &node{h: h}
			for _, rec := range recs {
				rec.Room = r.digest
				if cluster {
					if _, err := b.Create(context.Background(), SharedRecord{Record: rec, Holder: "another"}); err != nil {
						t.Fatal(err)
					}
					b.deliver(n)
				} else if _, err := h.shared.Create(context.Background(), SharedRecord{Record: rec, Holder: h.self}); err != nil {
					t.Fatal(err)
				}
				if held, _ := missedHeld(h, r); held > budget {
					t.Fatalf("after %s: %d bytes kept for absent agents, budget %d", rec.ID, held, budget)
				}
				if held := recordsHeld(h); held > budget {
					t.Fatalf("after %s: the records hold %d bytes, budget %d", rec.ID, held, budget)
				}
			}
			_, ids := missedHeld(h, r)
			if want := []string{"m15", "m16", "m17", "m18", "m19"}; fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Fatalf("kept %v, want the newest %v", ids, want)
			}
			ms := h.TakeMissed("tok", "/p", nil, 0)
			if len(ms) != 5 || ms[0].ID != "m15" || len(ms[4].Reply.Contents[0].GetImage().GetData()) != size {
				t.Fatalf("handed over %d answers, from %v", len(ms), ms)
			}
		})
	}
}

// TestOutcomeBytesBounded: the outcomes a room keeps for re-attaching
// callers are bounded by their bytes: past RetentionBytes the oldest go,
// from the room and from the records; the newest stay. A caller
// re-attaching to one that went is told what it is told once an outcome
// expired.
func TestOutcomeBytesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size, budget = 1 << 20, 5<<20 + 512<<10
		h := New(Options{Retention: 10 * time.Minute, RetentionBytes: budget})
		defer h.Close()
		r := h.room("tok")
		sum := wire.Digest(wire.AskQuestion, "", "q?")

		// An outcome that expired, for what a caller is told then.
		rc, ec := ask(h, "tok", "expired", time.Hour, context.Background())
		synctest.Wait()
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "expired", textReply("yes")); err != nil {
			t.Fatal(err)
		}
		<-rc
		<-ec
		time.Sleep(11 * time.Minute)
		synctest.Wait()
		_, _, expired := h.Reattach(context.Background(), "tok", wire.AskQuestion, "expired", sum)
		if !errors.Is(expired, ErrUnknown) {
			t.Fatalf("re-attaching to an expired outcome: %v", expired)
		}

		for i := range 20 {
			id := fmt.Sprint("q", i)
			rc, ec := ask(h, "tok", id, time.Hour, context.Background())
			synctest.Wait()
			if err := h.Answer(context.Background(), "tok", wire.AskQuestion, id, imageReply(i, size)); err != nil {
				t.Fatal(err)
			}
			<-rc
			<-ec
			if held, _ := settledHeld(r); held > budget {
				t.Fatalf("after %s: %d bytes of outcomes kept, budget %d", id, held, budget)
			}
			if held := recordsHeld(h); held > budget {
				t.Fatalf("after %s: the records hold %d bytes, budget %d", id, held, budget)
			}
		}
		if _, n := settledHeld(r); n != 5 {
			t.Fatalf("%d outcomes kept, want the newest 5", n)
		}
		if rep, _, err := h.Reattach(context.Background(), "tok", wire.AskQuestion, "q19", sum); err != nil || len(rep.Contents[0].GetImage().GetData()) != size {
			t.Fatalf("the newest outcome: %v", err)
		}
		_, _, dropped := h.Reattach(context.Background(), "tok", wire.AskQuestion, "q0", sum)
		if dropped == nil || dropped.Error() != expired.Error() {
			t.Fatalf("re-attaching to a dropped outcome: %v, want as expired: %v", dropped, expired)
		}
	})
}

// TestDroppedMissedAnswerAsExpired: an answer kept for an absent agent
// and dropped for its bytes is, to its agent coming back by ID, what one
// kept past MissedRetention is; the project's next call is not handed it.
func TestDroppedMissedAnswerAsExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size, budget = 1 << 20, 3<<20 + 512<<10
		h := New(Options{OrphanGrace: time.Hour, Retention: 10 * time.Minute, MissedRetention: 24 * time.Hour, MissedBytes: budget})
		defer h.Close()
		sum := wire.Digest(wire.AskQuestion, "/p", "q expired?")
		gone := func(id string, rep Reply) {
			answeredAway(t, h, id, rep)
		}
		gone("expired", textReply("yes"))
		time.Sleep(25 * time.Hour)
		synctest.Wait()
		_, _, expired := h.Reattach(context.Background(), "tok", wire.AskQuestion, "expired", sum)
		if !errors.Is(expired, ErrUnknown) {
			t.Fatalf("re-attaching to an expired answer: %v", expired)
		}

		for i := range 8 {
			gone(fmt.Sprint("big", i), imageReply(i, size))
		}
		time.Sleep(11 * time.Minute) // past Retention: only what is kept for absent agents is left
		synctest.Wait()
		_, _, dropped := h.Reattach(context.Background(), "tok", wire.AskQuestion, "big0", wire.Digest(wire.AskQuestion, "/p", "q big0?"))
		if dropped == nil || dropped.Error() != expired.Error() {
			t.Fatalf("re-attaching to a dropped answer: %v, want as expired: %v", dropped, expired)
		}
		if rep, _, err := h.Reattach(context.Background(), "tok", wire.AskQuestion, "big7", wire.Digest(wire.AskQuestion, "/p", "q big7?")); err != nil || len(rep.Contents[0].GetImage().GetData()) != size {
			t.Fatalf("the newest answer: %v", err)
		}
		ms := h.TakeMissed("tok", "/p", nil, 0)
		if len(ms) != 2 || ms[0].ID != "big5" || ms[1].ID != "big6" {
			t.Fatalf("handed over %+v, want big5 and big6", ms)
		}
	})
}

// TestDropLogged: each answer or outcome dropped for the bytes is logged
// once, with its request ID, never its content or the token.
func TestDropLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const token, size = "the-token-is-secret", 64 << 10
		var logs bytes.Buffer
		h := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), OrphanGrace: time.Hour,
			MissedBytes: 2*size + size/2, RetentionBytes: 3*size + size/2})
		defer h.Close()
		for i := range 6 {
			id := fmt.Sprint("r", i)
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				_, _ = h.Ask(ctx, token, Request{Kind: wire.AskQuestion, ID: id, ProjectDirectory: "/p", Text: "q?", Timeout: time.Hour})
			}()
			synctest.Wait()
			cancel()
			synctest.Wait()
			rep := imageReply(i, size)
			rep.Contents = append(rep.Contents, &pb.McpResultContent{Type: 1, Text: &pb.TextContent{Text: "the-private-answer"}})
			if err := h.Answer(context.Background(), token, wire.AskQuestion, id, rep); err != nil {
				t.Fatal(err)
			}
		}
		out := logs.String()
		if strings.Contains(out, token) || strings.Contains(out, "the-private-answer") || strings.Contains(out, "AAAA") {
			t.Fatalf("the log shows the token or an answer:\n%s", out)
		}
		count := func(msg, id string) int {
			n := 0
			for line := range strings.Lines(out) {
				if strings.Contains(line, msg) && strings.Contains(line, "id="+id+" ") {
					n++
				}
			}
			return n
		}
		for i := range 6 {
			id := fmt.Sprint("r", i)
			wantMissed, wantOutcome := 0, 0
			if i < 4 {
				wantMissed = 1
			}
			if i < 3 {
				wantOutcome = 1
			}
			if got := count("answer kept for an absent agent dropped", id); got != wantMissed {
				t.Errorf("%s: dropped answer logged %d times, want %d:\n%s", id, got, wantMissed, out)
			}
			if got := count("outcome kept for re-attaching callers dropped", id); got != wantOutcome {
				t.Errorf("%s: dropped outcome logged %d times, want %d:\n%s", id, got, wantOutcome, out)
			}
		}
	})
}

// TestKeptAnswersMemory measures the heap a token's answers hold while
// no agent waits for them: 64 answers of 1 MiB images each. Unbounded,
// the room, its outcomes and the records behind them held each twice
// (decoded and encoded), over 128 MiB; now what is kept is within its
// budgets.
func TestKeptAnswersMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size, answers = 1 << 20, 64
		const missedBudget, outcomeBudget = 8 << 20, 4 << 20
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		before := heap()
		h := New(Options{OrphanGrace: time.Hour, Retention: 10 * time.Minute, MissedBytes: missedBudget, RetentionBytes: outcomeBudget})
		defer h.Close()
		for i := range answers {
			id := fmt.Sprint("a", i)
			answeredAway(t, h, id, imageReply(i, size))
		}
		// Past the replay window (its own 32 MiB bound, for devices that
		// come back), within Retention and MissedRetention.
		time.Sleep(6 * time.Minute)
		synctest.Wait()
		after := heap()
		grew := int64(after) - int64(before)
		// The answers kept for absent agents and their records, each
		// once decoded and once encoded; the outcomes share the
		// decoded answers.
		limit := int64(2*missedBudget + outcomeBudget + 8<<20)
		t.Logf("heap grew by %.1f MiB for %d answers of 1 MiB (limit %.1f MiB)", float64(grew)/(1<<20), answers, float64(limit)/(1<<20))
		if grew > limit {
			t.Fatalf("the heap grew by %d bytes, over %d", grew, limit)
		}
		runtime.KeepAlive(h)
	})
}

// TestMissedSameTimeInOrder: answers kept at the same time (a coarse
// clock, a burst) are handed over in the order they were kept, and the
// newest of them is the one a room's bytes never drop.
func TestMissedSameTimeInOrder(t *testing.T) {
	now := time.Unix(1000, 0)
	h := New(Options{Now: func() time.Time { return now }})
	defer h.Close()
	r := h.room("tok")
	for i := range 3 {
		rec := store.Record{Room: r.digest, ID: fmt.Sprint("m", i), Kind: int(wire.AskQuestion), ProjectDirectory: "/p",
			Status: store.Answered, Reply: encodeReply(&Reply{}), ClosedAt: now, ClosedNote: ReasonUndelivered}
		if _, err := h.shared.Create(context.Background(), SharedRecord{Record: rec, Holder: h.self}); err != nil {
			t.Fatal(err)
		}
	}
	ms := h.TakeMissed("tok", "/p", nil, 0)
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	if fmt.Sprint(ids) != "[m0 m1 m2]" {
		t.Fatalf("handed over %v, want [m0 m1 m2]", ids)
	}
}

// TestKeptAnswerWithoutItsRecordForgotten: an answer kept for an absent
// agent whose record is no longer kept (its room's records went over
// their bytes a moment before the room did) is not offered again and
// again: the project's next call finds it gone, as once it expired.
func TestKeptAnswerWithoutItsRecordForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{OrphanGrace: time.Hour})
		defer h.Close()
		answeredAway(t, h, "q", textReply("yes"))
		r := h.room("tok")
		h.local.mu.Lock()
		delete(h.local.recs, localKey{r.digest, "q"})
		h.local.mu.Unlock()
		if ms := h.TakeMissed("tok", "/p", nil, 0); len(ms) != 0 {
			t.Fatalf("handed over an answer with no record: %+v", ms)
		}
		if held, ids := missedHeld(h, r); len(ids) != 0 || held != 0 {
			t.Fatalf("still offers %v (%d bytes)", ids, held)
		}
	})
}
