package cluster

import (
	"crypto/sha256"
	"testing"
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
