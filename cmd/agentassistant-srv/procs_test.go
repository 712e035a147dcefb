package main

import "testing"

// The product runs on what the runtime chooses unless told otherwise:
// settings that suit a benchmark's machine are the benchmark's to make.
func TestProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	if got := procs(0); got != 0 {
		t.Fatalf("default: %d, want 0 (the runtime's choice)", got)
	}
	if got := procs(3); got != 3 {
		t.Fatalf("configured: %d, want 3", got)
	}
	t.Setenv("GOMAXPROCS", "2")
	if got := procs(3); got != 0 {
		t.Fatalf("with GOMAXPROCS set: %d, want 0 (left to the runtime)", got)
	}
}
