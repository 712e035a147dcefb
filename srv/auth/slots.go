package auth

import "container/list"

// Slots is a table of connections waiting, bounded in all and per key
// (an address's Key, a token), that makes room for a newcomer by evicting
// the oldest: of the newcomer's key when that bound is the one reached,
// else of all. Pending keeps in it the connections not logged in yet,
// srv.IdleConns the HTTP connections in no handler. It has no lock: its
// owner holds its own around every call. The zero value is not usable;
// use NewSlots.
type Slots[T any] struct {
	max, perKey int       // max <= 0: no bound in all
	all         list.List // of *Slot[T], oldest first
	byKey       map[string]*list.List
}

// Slot is a place in Slots, holding its Value under its Key.
type Slot[T any] struct {
	Key   string
	Value T

	t       *Slots[T]
	el, kel *list.Element
}

// NewSlots takes up to max slots (max <= 0: any number), perKey of them
// under one key.
func NewSlots[T any](max, perKey int) *Slots[T] {
	return &Slots[T]{max: max, perKey: perKey, byKey: make(map[string]*list.List)}
}

// Add puts s, in no table, in t as the newest slot. At a bound it takes
// out and returns the oldest slot whose Value evictable accepts (nil: any
// slot) to make room. When there is none, s is not added and the error
// says which bound: ErrPendingAddr its key's, ErrPendingFull the whole.
func (t *Slots[T]) Add(s *Slot[T], evictable func(T) bool) (victim *Slot[T], err error) {
	switch kl := t.byKey[s.Key]; {
	case kl != nil && kl.Len() >= t.perKey:
		if victim = oldest(kl, evictable); victim == nil {
			return nil, ErrPendingAddr
		}
	case t.max > 0 && t.all.Len() >= t.max:
		if victim = oldest(&t.all, evictable); victim == nil {
			return nil, ErrPendingFull
		}
	}
	victim.Remove()
	kl := t.byKey[s.Key] // the victim may have been its key's last
	if kl == nil {
		kl = list.New()
		t.byKey[s.Key] = kl
	}
	s.t = t
	s.el = t.all.PushBack(s)
	s.kel = kl.PushBack(s)
	return victim, nil
}

// oldest is the oldest slot of l whose Value evictable accepts.
func oldest[T any](l *list.List, evictable func(T) bool) *Slot[T] {
	for el := l.Front(); el != nil; el = el.Next() {
		if s := el.Value.(*Slot[T]); evictable == nil || evictable(s.Value) {
			return s
		}
	}
	return nil
}

// Len is the number of slots taken.
func (t *Slots[T]) Len() int { return t.all.Len() }

// In reports whether s is in a table.
func (s *Slot[T]) In() bool { return s.el != nil }

// Remove takes s out of its table, if it is in one.
func (s *Slot[T]) Remove() {
	if s == nil || s.el == nil {
		return
	}
	t := s.t
	t.all.Remove(s.el)
	kl := t.byKey[s.Key]
	kl.Remove(s.kel)
	if kl.Len() == 0 {
		delete(t.byKey, s.Key)
	}
	s.el, s.kel = nil, nil
}
