package typing

import "context"

// xdotool types on X11 through the XTEST extension, as xtest does, with
// the xdotool program (-backend xdotool). For a character the keyboard map
// lacks it remaps one spare keycode for that moment, so when the focused
// window lags behind it can lose or swap such characters (Chinese, say);
// xtest, the default, does not.
type xdotool struct{ path string }

func (x *xdotool) Name() string { return "xdotool" }

// delay is xdotool's own default between keystrokes, in milliseconds; it
// gives slow clients time to take each keymap change.
const xdotoolDelay = "12"

func (x *xdotool) Type(ctx context.Context, s string) error {
	return run(ctx, x.path, "type", "--delay", xdotoolDelay, "--", s)
}

func (x *xdotool) Press(ctx context.Context, k Key, n int) error {
	return inBatches(ctx, n, 50, func(n int) error {
		return run(ctx, x.path, append([]string{"key", "--delay", xdotoolDelay}, repeated(n, xkbName(k))...)...)
	})
}

// xkbName is k's keysym name, which xdotool and wtype both take.
func xkbName(k Key) string {
	switch k {
	case Enter:
		return "Return"
	case Backspace:
		return "BackSpace"
	case Tab:
		return "Tab"
	}
	panic("typing: no keysym for " + k.String())
}
