package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
)

// TestScanListsEveryOwedNote: every question a cluster sends to a
// channel leaves a note under "owed." while it may still be followed
// up, and marking its follow-up owed writes the note again, last. The
// scan read the first 4,096 keys, oldest written first: past that many
// notes, the follow-ups just marked owed were the ones a new lease
// holder never found. Now the scan lists every live note.
func TestScanListsEveryOwedNote(t *testing.T) {
	ns := natstest.Start(t)
	c, err := Open(context.Background(), Options{URL: ns.URL(), Tokens: []string{tok}, Instance: "a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ch, err := c.OpenChannels(t.Context(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const n = 4200
	until := time.Now().Add(time.Hour)
	for i := range n {
		if err := ch.Put(t.Context(), fmt.Sprintf("owed.sent.%05d", i), fmt.Appendf(nil, "sent %05d", i), until); err != nil {
			t.Fatal(err)
		}
	}
	// The oldest question's follow-up is owed now: its note written again.
	if err := ch.Put(t.Context(), "owed.sent.00000", []byte("owed 00000"), until); err != nil {
		t.Fatal(err)
	}
	// And one note past its time, which the scan leaves out.
	if err := ch.Put(t.Context(), "owed.sent.past", []byte("past"), time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := ch.Scan(t.Context(), "owed.", func(v []byte) error {
		got = append(got, string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != n || !slices.Contains(got, "owed 00000") || slices.Contains(got, "sent 00000") || slices.Contains(got, "past") {
		t.Errorf("the scan listed %d notes (the owed one: %v), want all %d live ones", len(got), slices.Contains(got, "owed 00000"), n)
	}
}
