package main

import (
	"runtime"
	"testing"
)

func TestProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	if got, want := procs(0), max(1, runtime.GOMAXPROCS(0)/2); got != want {
		t.Fatalf("default: %d, want %d", got, want)
	}
	if got := procs(3); got != 3 {
		t.Fatalf("configured: %d, want 3", got)
	}
	t.Setenv("GOMAXPROCS", "2")
	if got := procs(3); got != 0 {
		t.Fatalf("with GOMAXPROCS set: %d, want 0 (left to the runtime)", got)
	}
}
