package channel

import (
	"strconv"
	"testing"
	"time"
)

// TestWindow: n events of a key a window, the next allowed one told how
// many were refused; other keys counted apart; the keys counted bounded.
func TestWindow(t *testing.T) {
	var w window
	now := time.Unix(1_800_000_000, 0)
	for i := range 3 {
		if ok, _ := w.allow("a", 3, time.Minute, now); !ok {
			t.Fatalf("event %d of 3 refused", i+1)
		}
	}
	for range 4 {
		if ok, _ := w.allow("a", 3, time.Minute, now.Add(59*time.Second)); ok {
			t.Fatal("a fourth event in the window allowed")
		}
	}
	if ok, _ := w.allow("b", 3, time.Minute, now); !ok {
		t.Fatal("another key's event refused")
	}
	if ok, refused := w.allow("a", 3, time.Minute, now.Add(time.Minute)); !ok || refused != 4 {
		t.Fatalf("the next window's first event: %v, %d refused, want true, 4", ok, refused)
	}
	for i := range 3 * maxWindowKeys {
		w.allow(strconv.Itoa(i), 3, time.Minute, now.Add(time.Duration(i)*time.Millisecond))
	}
	if n := len(w.keys); n > maxWindowKeys {
		t.Errorf("%d keys counted, want at most %d", n, maxWindowKeys)
	}
}
