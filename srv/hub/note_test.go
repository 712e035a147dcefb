package hub

import (
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// encoding is a client whose door encodes every note it is sent, as
// /ws's connection does, counting the encodings.
type encoding struct {
	*fakeClient
	encoded *atomic.Int32
}

func (e *encoding) Send(n *Note) bool {
	n.Encoded(func(*Note) [][]byte {
		e.encoded.Add(1)
		return [][]byte{[]byte(fmt.Sprint(n.Kind))}
	})
	return e.fakeClient.Send(n)
}

// TestBroadcastEncodesOnce: a question to a crowd of devices, split among
// goroutines, is one note encoded once, not once a device; a device that
// resumes is replayed the same note, not encoded again.
func TestBroadcastEncodesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{})
		defer h.Close()
		var encoded atomic.Int32
		const crowd = 4 * crowdPart
		devs := make([]*encoding, crowd)
		for i := range devs {
			devs[i] = &encoding{newFake(fmt.Sprint("d", i)), &encoded}
			h.Join("tok", devs[i], nil, Resume{})
		}
		time.Sleep(time.Minute) // the arrivals' presence goes out first
		synctest.Wait()
		ask(h, "tok", "first", time.Hour, t.Context())
		synctest.Wait()
		seen := devs[0].waitFor(t, NoteAsked).Seq
		before := encoded.Load()
		ask(h, "tok", "q", time.Hour, t.Context())
		synctest.Wait()
		for _, d := range devs {
			if got := d.cmds(); len(got) == 0 || got[len(got)-1] != NoteAsked || got[len(got)-2] != NoteAsked {
				t.Fatalf("%s got %v", d.id, got)
			}
		}
		if n := encoded.Load() - before; n != 1 {
			t.Fatalf("the question was encoded %d times for %d devices, want once", n, crowd)
		}
		back := &encoding{newFake("back"), &encoded}
		h.Join("tok", back, nil, Resume{Epoch: h.Epoch(), From: seen})
		if got := back.cmds(); len(got) != 1 || got[0] != NoteAsked {
			t.Fatalf("resumed after the first question, got %v", got)
		}
		if n := encoded.Load() - before; n != 1 {
			t.Fatalf("the replay encoded the question again (%d times in all)", n)
		}
	})
}
