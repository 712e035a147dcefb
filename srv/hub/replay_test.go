package hub

import (
	"fmt"
	"testing"
	"time"
)

func TestReplayRingKeepsTheLastEvents(t *testing.T) {
	r := &room{}
	now := time.Now()
	total := replayEvents + 300
	for i := 1; i <= total; i++ {
		r.emitAtLocked([]*Note{{Kind: NoteAsked, Request: Request{ID: fmt.Sprint("e", i)}}}, uint64(i), now)
	}
	oldest := uint64(total - replayEvents + 1)
	check := func(from uint64, want int) {
		t.Helper()
		got, ok := r.replayLocked(from, 0, uint64(total), now)
		if !ok || len(got) != want {
			t.Fatalf("replay from %d: %d events, ok %v; want %d", from, len(got), ok, want)
		}
		for i, n := range got {
			if want := from + uint64(i) + 1; n.Seq != want || n.Request.ID != fmt.Sprint("e", want) {
				t.Fatalf("replay from %d: event %d is %s, seq %d", from, i, n.Request.ID, n.Seq)
			}
		}
	}
	check(oldest-1, replayEvents)
	check(uint64(total-5), 5)
	check(uint64(total), 0)
	if _, ok := r.replayLocked(oldest-2, 0, uint64(total), now); ok {
		t.Fatal("an event that was overwritten was replayed")
	}
	if _, ok := r.replayLocked(oldest-1, 0, uint64(total), now.Add(replayAge+time.Second)); ok {
		t.Fatal("events older than replayAge were replayed")
	}
}
