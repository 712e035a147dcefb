package typing

import (
	"context"
	"testing"

	"github.com/agentassistant/agentassistant/internal/xvfbtest"
)

// TestXdotoolIntoXterm types through the real X11 path: xdotool into an
// xterm running `cat > FILE` on Xvfb; the file must hold exactly the text,
// Chinese included, with a mistake erased by Backspace.
func TestXdotoolIntoXterm(t *testing.T) {
	d := xvfbtest.Start(t)
	x := d.StartXterm(t)
	t.Setenv("DISPLAY", d.Name)
	t.Setenv("WAYLAND_DISPLAY", "")
	kb, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if kb.Name() != "xdotool" {
		t.Fatalf("picked %s on X11", kb.Name())
	}
	ctx := context.Background()
	if err := Write(ctx, kb, "hello 你好\r\nwrold 世", nil); err != nil {
		t.Fatal(err)
	}
	if err := kb.Press(ctx, Backspace, len([]rune("wrold 世"))); err != nil {
		t.Fatal(err)
	}
	if err := Write(ctx, kb, "world 世界\tand a tab", nil); err != nil {
		t.Fatal(err)
	}
	if got, want := x.Close(t), "hello 你好\nworld 世界\tand a tab"; got != want {
		t.Errorf("the xterm got %q, want %q", got, want)
	}
}
