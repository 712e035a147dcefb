package typing

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// osascript types on macOS through System Events. Text is pasted: the
// clipboard is set to it, Cmd-V pressed, and the previous clipboard put
// back. Keystroke-typing would go through the active input method (a
// Pinyin IME turns "hello" into a candidate list) and cannot produce
// characters the keyboard layout lacks; a paste arrives as the text itself.
// osascript needs no cgo, so the binary cross-compiles from any platform.
type osascript struct{ path string }

func (o *osascript) Name() string { return "osascript" }

// The scripts take their data as arguments, never spliced into the
// source. Text goes behind a "+" that the script drops, so a text that
// begins with "-" cannot read as an option of osascript.
const (
	pasteScript = `on run argv
	set saved to missing value
	try
		set saved to the clipboard
	end try
	set the clipboard to (text 2 thru -1 of (item 1 of argv))
	tell application "System Events" to keystroke "v" using command down
	delay 0.3
	if saved is not missing value then set the clipboard to saved
end run`
	keyScript = `on run argv
	set c to (item 1 of argv) as integer
	set n to (item 2 of argv) as integer
	tell application "System Events"
		repeat n times
			key code c
		end repeat
	end tell
end run`
)

func (o *osascript) Type(ctx context.Context, s string) error {
	return o.script(ctx, pasteScript, "+"+s)
}

func (o *osascript) Press(ctx context.Context, k Key, n int) error {
	return inBatches(ctx, n, 200, func(n int) error {
		return o.script(ctx, keyScript, strconv.Itoa(macKeyCode(k)), strconv.Itoa(n))
	})
}

func (o *osascript) script(ctx context.Context, src string, args ...string) error {
	err := run(ctx, o.path, append([]string{"-e", src}, args...)...)
	if err != nil && (strings.Contains(err.Error(), "not allowed") || strings.Contains(err.Error(), "-1719") || strings.Contains(err.Error(), "1002")) {
		return fmt.Errorf("%w (allow the terminal or agentassistant-input to control the computer: System Settings › Privacy & Security › Accessibility)", err)
	}
	return err
}

// macKeyCode is k's virtual key code on a Mac keyboard.
func macKeyCode(k Key) int {
	switch k {
	case Enter:
		return 36
	case Backspace:
		return 51 // "delete", left of the backslash
	case Tab:
		return 48
	}
	panic("typing: no key code for " + k.String())
}
