package hub

import (
	"fmt"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
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

// TestReplayRingBoundedInBytes: the replay ring kept a room's last 1,024
// events whatever they held, and an answer's event holds its images: a
// room answered with images kept hundreds of MiB for devices that come
// back (and an event older than the replay window until overwritten).
// It now keeps 32 MiB of them at most, and nothing older than the
// window; a device that comes back after one was let go resyncs.
func TestReplayRingBoundedInBytes(t *testing.T) {
	r := &room{}
	now := time.Now()
	image := strings.Repeat("A", 256<<10)
	const total = 200 // 50 MiB of images
	for i := 1; i <= total; i++ {
		reply := &Reply{Contents: []*pb.McpResultContent{{Type: 2, Image: &pb.ImageContent{Type: "image", Data: image, MimeType: "image/png"}}}}
		r.emitAtLocked([]*Note{{Kind: NoteAnswered, Request: Request{ID: fmt.Sprint("e", i)}, Reply: reply}}, uint64(i), now)
	}
	var held int
	for i := range r.events.len() {
		for _, n := range r.events.at(i).notes {
			for _, c := range n.Reply.Contents {
				held += len(c.GetImage().GetData())
			}
		}
	}
	if held > 32<<20 {
		t.Errorf("the replay ring holds %d MiB of answers, want at most 32", held>>20)
	}
	if got, ok := r.replayLocked(total-3, 0, total, now); !ok || len(got) != 3 {
		t.Errorf("the newest events: %d replayed, ok %v; want 3", len(got), ok)
	}
	if _, ok := r.replayLocked(1, 0, total, now); ok {
		t.Error("a replay from before the events let go was made, not a resync")
	}

	// An event older than the window goes with the next one.
	r.emitAtLocked([]*Note{{Kind: NoteAsked, Request: Request{ID: "late"}}}, total+1, now.Add(replayAge+time.Second))
	if n := r.events.len(); n != 1 {
		t.Errorf("%d events kept past the replay window, want only the newest", n)
	}
}
