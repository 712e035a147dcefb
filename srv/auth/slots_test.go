package auth

import (
	"errors"
	"testing"
)

// TestSlotsEvictOldest: past its key's bound a newcomer takes the place
// of its key's oldest, past the whole bound of the oldest of all; one
// that no slot can make room for is refused, saying which bound.
func TestSlotsEvictOldest(t *testing.T) {
	tb := NewSlots[string](3, 2)
	add := func(key, v string, evictable func(string) bool) (*Slot[string], string, error) {
		s := &Slot[string]{Key: key, Value: v}
		victim, err := tb.Add(s, evictable)
		if victim == nil {
			return s, "", err
		}
		if victim.In() {
			t.Errorf("victim %s still in the table", victim.Value)
		}
		return s, victim.Value, err
	}
	add("b", "b1", nil)
	a1, _, _ := add("a", "a1", nil)
	add("a", "a2", nil)
	if _, v, _ := add("a", "a3", nil); v != "a1" {
		t.Errorf("past a's bound: evicted %q, want a1, a's oldest", v)
	}
	if a1.In() {
		t.Error("a1 evicted and still in")
	}
	if _, v, _ := add("c", "c1", nil); v != "b1" {
		t.Errorf("past the whole bound: evicted %q, want b1, the oldest of all", v)
	}
	if n := tb.Len(); n != 3 {
		t.Errorf("%d slots, want 3", n)
	}
	never := func(string) bool { return false }
	if s, _, err := add("c", "c2", never); !errors.Is(err, ErrPendingFull) || s.In() {
		t.Errorf("none evictable, whole bound: %v, in %v", err, s.In())
	}
	tb = NewSlots[string](0, 1)
	add("k", "k1", never)
	if _, _, err := add("k", "k2", never); !errors.Is(err, ErrPendingAddr) {
		t.Errorf("none evictable, key's bound: %v", err)
	}
	s, _, _ := add("m", "m1", nil)
	s.Remove()
	s.Remove()
	if s.In() || tb.Len() != 1 {
		t.Errorf("after Remove twice: in %v, %d slots, want 1", s.In(), tb.Len())
	}
}
