package lru

import (
	"maps"
	"testing"
)

func TestOldestSkipsBusy(t *testing.T) {
	var m Map[string, int]
	m.Put("a", 1)
	m.Put("b", 2)
	m.Put("c", 3)
	if _, ok := m.Use("a"); !ok { // a is now the most recently used
		t.Fatal("a not found")
	}
	k, v, ok := m.Oldest(func(int) bool { return true })
	if !ok || k != "b" || v != 2 {
		t.Fatalf("oldest = %q %d %v, want b", k, v, ok)
	}
	k, _, ok = m.Oldest(func(v int) bool { return v != 2 }) // b is busy
	if !ok || k != "c" {
		t.Fatalf("oldest not busy = %q %v, want c", k, ok)
	}
	if _, _, ok = m.Oldest(func(int) bool { return false }); ok {
		t.Fatal("found one though every one is busy")
	}
}

func TestGetDoesNotCountAUse(t *testing.T) {
	var m Map[string, int]
	m.Put("a", 1)
	m.Put("b", 2)
	if v, ok := m.Get("a"); !ok || v != 1 {
		t.Fatalf("Get(a) = %d %v", v, ok)
	}
	if k, _, _ := m.Oldest(func(int) bool { return true }); k != "a" {
		t.Fatalf("oldest = %q, want a: Get counted a use", k)
	}
	m.Put("a", 10) // a Put is a use
	if k, _, _ := m.Oldest(func(int) bool { return true }); k != "b" {
		t.Fatalf("oldest = %q, want b", k)
	}
	if v, _ := m.Get("a"); v != 10 {
		t.Fatalf("a = %d after Put", v)
	}
}

func TestNilReadsAsEmpty(t *testing.T) {
	var m *Map[string, int]
	if _, ok := m.Get("x"); ok || m.Len() != 0 {
		t.Fatal("a nil Map holds something")
	}
	if _, ok := m.Use("x"); ok {
		t.Fatal("a nil Map holds x")
	}
	if _, _, ok := m.Oldest(func(int) bool { return true }); ok {
		t.Fatal("a nil Map has an oldest")
	}
	for range m.All() {
		t.Fatal("a nil Map yields")
	}
	m.Delete("x")
}

func TestDeleteAndAll(t *testing.T) {
	var m Map[string, int]
	if _, ok := m.Get("x"); ok || m.Len() != 0 {
		t.Fatal("the zero Map holds something")
	}
	m.Delete("x") // nothing there: no panic
	m.Put("a", 1)
	m.Put("b", 2)
	m.Delete("a")
	if _, ok := m.Use("a"); ok || m.Len() != 1 {
		t.Fatalf("a still held, Len %d", m.Len())
	}
	if got := maps.Collect(m.All()); len(got) != 1 || got["b"] != 2 {
		t.Fatalf("All = %v", got)
	}
}
