package cluster

import (
	"context"
	"crypto/sha256"
	"testing"

	"github.com/agentassistant/agentassistant/internal/natstest"
)

// TestHeardOnce: a note heard twice (on the subject and from the
// bucket) is handed on once; one heard before the last mcpHeard is
// forgotten, so the set stays bounded.
func TestHeardOnce(t *testing.T) {
	s := newHeardSet(3)
	sum := func(b byte) [sha256.Size]byte { return sha256.Sum256([]byte{b}) }
	for _, b := range []byte{1, 2, 3} {
		if !s.add(sum(b)) {
			t.Fatalf("note %d is new, not heard", b)
		}
	}
	if s.add(sum(2)) {
		t.Fatal("note 2 heard twice")
	}
	if !s.add(sum(4)) { // 1 makes way
		t.Fatal("note 4 is new")
	}
	if !s.add(sum(1)) {
		t.Fatal("note 1, forgotten, is not heard again")
	}
	if s.add(sum(4)) || s.add(sum(3)) {
		t.Fatal("a note among the last three heard twice")
	}
	if len(s.seen) != 3 || len(s.ring) != 3 {
		t.Fatalf("the set holds %d (%d in its ring), not 3", len(s.seen), len(s.ring))
	}
}

// TestMCPNoteValue: a kept note's value gives back its teller and the
// note; one with no teller's name is none.
func TestMCPNoteValue(t *testing.T) {
	from, note := splitMCPNote(mcpNoteValue("b", []byte(`{"k":"end"}`)))
	if from != "b" || string(note) != `{"k":"end"}` {
		t.Fatalf("got %q %q", from, note)
	}
	if _, note := splitMCPNote([]byte(`{"k":"end"}`)); note != nil {
		t.Fatalf("a value with no teller gave %q", note)
	}
}

// TestMCPNotesOfAnEarlierRun: an instance restarted under its name (as
// docs/cluster.md advises) hears the notes its previous run told: a
// session its client ended there stays ended. Its own notes of this run
// it does not hear back.
func TestMCPNotesOfAnEarlierRun(t *testing.T) {
	ns := natstest.Start(t)
	open := func() *Cluster {
		c, err := Open(context.Background(), Options{URL: ns.URL(), Tokens: []string{tok}, Instance: "a"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := open()
	before.MCP().Tell([]byte(`{"k":"end","n":1}`))
	if err := before.Close(); err != nil {
		t.Fatal(err)
	}

	after := open()
	defer after.Close()
	heard := make(chan string, 4)
	stop, err := after.MCP().Listen(func(note []byte) { heard <- string(note) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	select {
	case n := <-heard:
		if n != `{"k":"end","n":1}` {
			t.Fatalf("heard %s", n)
		}
	default: // Listen returns once the kept notes are heard
		t.Fatal("a note of this instance's previous run is not heard after a restart")
	}
	after.MCP().Tell([]byte(`{"k":"end","n":2}`))
	// A note of another instance kept after it, heard only from the
	// bucket, so in the bucket's order: once it is heard, the one before
	// it was skipped or heard.
	third := []byte(`{"k":"end","n":3}`)
	if _, err := after.mcpNotes.Put(context.Background(), mcpNoteKey(third), mcpNoteValue("b", third)); err != nil {
		t.Fatal(err)
	}
	if n := <-heard; n != string(third) {
		t.Fatalf("a run heard its own note %s", n)
	}
	later := open() // a later run hears them all
	defer later.Close()
	got := make(chan string, 4)
	stop2, err := later.MCP().Listen(func(note []byte) { got <- string(note) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	if len(got) != 3 {
		t.Fatalf("a later run heard %d kept notes, want 3", len(got))
	}
}
