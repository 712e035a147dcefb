package typing

import "context"

// wtype types on Wayland compositors that offer the virtual-keyboard
// protocol; it uploads a keymap holding the characters it types, so any
// Unicode text comes out right.
type wtype struct{ path string }

func (w *wtype) Name() string { return "wtype" }

func (w *wtype) Type(ctx context.Context, s string) error {
	// A text that begins with "-" would read as an option.
	return run(ctx, w.path, "--", s)
}

func (w *wtype) Press(ctx context.Context, k Key, n int) error {
	return inBatches(ctx, n, 50, func(n int) error {
		return run(ctx, w.path, repeated(n, "-k", xkbName(k))...)
	})
}
