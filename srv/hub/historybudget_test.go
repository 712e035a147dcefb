package hub

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// A room past its history budget loses its oldest settled requests from
// the store, never what the lifecycle still needs: a pending request,
// nor an answer kept for an absent agent, which that agent gets after a
// restart too.
func TestHistoryBudgetKeepsWhatAgentsWaitFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		const budget = 256 << 10
		open := func() (*store.Store, *Hub) {
			db, err := store.Open(dir, store.Options{HistoryBytes: budget})
			if err != nil {
				t.Fatal(err)
			}
			// Outcomes for returning callers are kept in memory past
			// their first only within a few bytes: the older ones are
			// history only, the budget's to evict.
			h := New(Options{Store: db, RetentionBytes: 1})
			restored(t, h)
			return db, h
		}
		db, h := open()
		defer func() { // the open ones, also when the test fails
			h.Close()
			_ = db.Close()
		}()
		big := strings.Repeat("x", 40<<10)
		// Each asked a second after the last (the bubble's clock): the
		// store keeps a room's records in the order they were asked.
		ask := func(id string) (context.CancelFunc, chan *Reply) {
			time.Sleep(time.Second)
			return askIn(h, id, "/p")
		}
		answer := func(id string) {
			t.Helper()
			if err := h.Answer(context.Background(), "tok", wire.AskQuestion, id, textReply(big+id)); err != nil {
				t.Fatal(err)
			}
		}
		// The oldest: an answer its agent left before, kept for it.
		cancel, reply := ask("gone")
		synctest.Wait()
		cancel()
		<-reply
		answer("gone")
		// Next: a question nobody answers.
		_, _ = ask("waiting")
		synctest.Wait()
		// Then many answers agents had, far past the budget.
		for i := range 20 {
			id := fmt.Sprint("done", i)
			cancel, reply := ask(id)
			synctest.Wait()
			answer(id)
			<-reply
			cancel()
		}
		var ids []string
		var size int
		if err := db.All(func(r store.Record) error {
			ids = append(ids, r.ID)
			size += len(r.Text) + len(r.Reply)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ids, "gone") || !slices.Contains(ids, "waiting") || slices.Contains(ids, "done0") || !slices.Contains(ids, "done19") {
			t.Fatalf("the store keeps %v: want gone, waiting and the newest, not the oldest answered", ids)
		}
		if size > budget {
			t.Errorf("the room's records hold %d bytes, past %d", size, budget)
		}
		h.Close()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		db, h = open()
		ms := h.TakeMissed("tok", "/p", nil, 0)
		if len(ms) != 1 || ms[0].ID != "gone" || ms[0].Reply.Contents[0].GetText().GetText() != big+"gone" {
			t.Fatalf("after a restart the kept answer is %+v, want gone's", ms)
		}
		if ps := pendingOf(h, "tok"); len(ps) != 1 || ps[0].Request.ID != "waiting" {
			t.Fatalf("after a restart pending is %v, want waiting", ps)
		}
	})
}
