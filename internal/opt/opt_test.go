package opt

import (
	"log/slog"
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

func TestLoggerAndClock(t *testing.T) {
	var o struct {
		Logger *slog.Logger
		Now    func() time.Time
	}
	Logger(&o.Logger)
	Clock(&o.Now)
	if o.Logger == nil || o.Now == nil {
		t.Fatal("nil logger or clock left nil")
	}
	o.Logger.Info("discarded") // does not panic
	l := slog.Default()
	fixed := time.Unix(1, 0)
	o.Logger, o.Now = l, func() time.Time { return fixed }
	Logger(&o.Logger)
	Clock(&o.Now)
	if o.Logger != l || !o.Now().Equal(fixed) {
		t.Fatal("a given logger or clock was replaced")
	}
}
