//go:build !darwin && !windows

package typing

import (
	"context"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/xvfbtest"
)

// x11 opens the display's xterm and the keyboard, in that order.
func x11(t *testing.T, backend string) (*xvfbtest.Xterm, Keyboard) {
	t.Helper()
	d := xvfbtest.Start(t)
	x := d.StartXterm(t)
	t.Setenv("DISPLAY", d.Name)
	t.Setenv("WAYLAND_DISPLAY", "")
	kb, err := New(Options{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := kb.(io.Closer); ok {
		t.Cleanup(func() { _ = c.Close() })
	}
	return x, kb
}

// TestXTestIntoXterm types through the real X11 path: XTEST into an xterm
// running `cat > FILE` on Xvfb; the file must hold exactly the text,
// Chinese included, with a mistake erased by Backspace.
func TestXTestIntoXterm(t *testing.T) {
	x, kb := x11(t, "")
	if kb.Name() != "xtest" {
		t.Fatalf("picked %s on X11", kb.Name())
	}
	ctx := context.Background()
	if err := Write(ctx, kb, "Hello 你好 ~!@#$%^&*()_+{}|:\"<>? é\r\nwrold 世", nil); err != nil {
		t.Fatal(err)
	}
	if err := kb.Press(ctx, Backspace, len([]rune("wrold 世"))); err != nil {
		t.Fatal(err)
	}
	if err := Write(ctx, kb, "World 世界\tand a tab", nil); err != nil {
		t.Fatal(err)
	}
	if got, want := x.Close(t), "Hello 你好 ~!@#$%^&*()_+{}|:\"<>? é\nWorld 世界\tand a tab"; got != want {
		t.Errorf("the xterm got %q, want %q", got, want)
	}
}

// TestXTestManyCharactersOffTheMap types more distinct characters than
// the map has free keycodes (Xvfb has about 20), so keycodes are given new
// characters over and over; not one may be lost or swapped.
func TestXTestManyCharactersOffTheMap(t *testing.T) {
	x, kb := x11(t, "xtest")
	var b strings.Builder
	for i := range 90 {
		b.WriteRune(rune(0x4e00 + 7*i)) // 90 different CJK ideographs
		if i%30 == 29 {
			b.WriteString("\n")
		}
	}
	text := b.String() + "再见 — 😀"
	if err := Write(context.Background(), kb, text, nil); err != nil {
		t.Fatal(err)
	}
	if got := x.Close(t); got != text {
		t.Errorf("the xterm got\n%q\nwant\n%q", got, text)
	}
}

// TestXTestWindowThatLags: the xterm stops reading for a moment while
// more characters than there are free keycodes are typed into it. It reads
// the keyboard map when it gets to each key, so a keycode given a new
// character before the window caught up would type the new one.
func TestXTestWindowThatLags(t *testing.T) {
	x, kb := x11(t, "xtest")
	var b strings.Builder
	for i := range 40 {
		b.WriteRune(rune(0x5000 + 3*i))
	}
	text := b.String()
	if err := x.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Write(context.Background(), kb, text, nil) }()
	time.Sleep(300 * time.Millisecond) // the window is behind meanwhile
	if err := x.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := x.Close(t); got != text {
		t.Errorf("the xterm got\n%q\nwant\n%q", got, text)
	}
}

// TestXdotoolIntoXterm: the xdotool backend, with what is on the keyboard
// map (xdotool remaps one keycode for every other character and can lose
// characters when the window lags; xtest is the default for that reason).
func TestXdotoolIntoXterm(t *testing.T) {
	xvfbtest.Need(t, "xdotool")
	x, kb := x11(t, "xdotool")
	ctx := context.Background()
	if err := Write(ctx, kb, "-n echo 'hi' $HOME\nwrold", nil); err != nil {
		t.Fatal(err)
	}
	if err := kb.Press(ctx, Backspace, 5); err != nil {
		t.Fatal(err)
	}
	if err := Write(ctx, kb, "world\tok", nil); err != nil {
		t.Fatal(err)
	}
	if got, want := x.Close(t), "-n echo 'hi' $HOME\nworld\tok"; got != want {
		t.Errorf("the xterm got %q, want %q", got, want)
	}
}
