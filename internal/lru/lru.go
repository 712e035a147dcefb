// Package lru keeps values by key with the order of their last use, so an
// owner that bounds how many one token holds can let the one unused the
// longest make room, among those it may let go.
package lru

import "iter"

// Map is a map whose entries remember when they were last used. The zero
// Map is empty and ready, and a nil *Map reads as empty; its owner's
// lock guards it.
type Map[K comparable, V any] struct {
	m     map[K]*entry[V]
	clock uint64 // orders the uses
}

type entry[V any] struct {
	v    V
	used uint64
}

func (m *Map[K, V]) tick() uint64 { m.clock++; return m.clock }

func (m *Map[K, V]) entries() map[K]*entry[V] {
	if m == nil {
		return nil
	}
	return m.m
}

// Get returns the value of k without counting a use.
func (m *Map[K, V]) Get(k K) (V, bool) {
	if e := m.entries()[k]; e != nil {
		return e.v, true
	}
	var zero V
	return zero, false
}

// Use returns the value of k and counts a use of it.
func (m *Map[K, V]) Use(k K) (V, bool) {
	e := m.entries()[k]
	if e == nil {
		var zero V
		return zero, false
	}
	e.used = m.tick()
	return e.v, true
}

// Put sets the value of k, a use of it.
func (m *Map[K, V]) Put(k K, v V) {
	if m.m == nil {
		m.m = make(map[K]*entry[V])
	}
	m.m[k] = &entry[V]{v: v, used: m.tick()}
}

// Delete forgets k.
func (m *Map[K, V]) Delete(k K) { delete(m.entries(), k) }

// Len counts the entries.
func (m *Map[K, V]) Len() int { return len(m.entries()) }

// All yields every entry, in no order.
func (m *Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for k, e := range m.entries() {
			if !yield(k, e.v) {
				return
			}
		}
	}
}

// Oldest returns the entry unused the longest among those mayGo allows,
// false when it allows none. It forgets nothing: the owner lets it go.
func (m *Map[K, V]) Oldest(mayGo func(V) bool) (K, V, bool) {
	var (
		key K
		old *entry[V]
	)
	for k, e := range m.entries() {
		if (old == nil || e.used < old.used) && mayGo(e.v) {
			key, old = k, e
		}
	}
	if old == nil {
		var zero V
		return key, zero, false
	}
	return key, old.v, true
}
