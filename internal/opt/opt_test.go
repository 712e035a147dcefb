package opt

import (
	"testing"
	"time"
)

func TestDefault(t *testing.T) {
	d := time.Duration(0)
	Default(&d, 5*time.Second)
	if d != 5*time.Second {
		t.Fatalf("zero duration: got %v, want the default", d)
	}
	d = -time.Second
	Default(&d, 5*time.Second)
	if d != 5*time.Second {
		t.Fatalf("negative duration: got %v, want the default", d)
	}
	d = time.Millisecond
	Default(&d, 5*time.Second)
	if d != time.Millisecond {
		t.Fatalf("set duration: got %v, want it kept", d)
	}
	n := 0
	Default(&n, 64)
	if n != 64 {
		t.Fatalf("zero int: got %d", n)
	}
	var b int64 = 7
	Default(&b, 4<<20)
	if b != 7 {
		t.Fatalf("set int64: got %d", b)
	}
}
