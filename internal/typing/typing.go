// Package typing types text into the window that has the keyboard focus,
// through whatever the platform offers: XTEST on X11 (or xdotool), wtype
// on Wayland, System Events (osascript) on macOS, SendInput on Windows.
// New picks one at run time; a platform without one gets an error that
// names what to install, never a keyboard that silently does nothing. A
// Keyboard that holds resources is also an io.Closer.
package typing

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Key is a key pressed on its own.
type Key int

// The keys a Keyboard presses besides text.
const (
	Enter Key = iota
	Backspace
	Tab
)

func (k Key) String() string {
	switch k {
	case Enter:
		return "Enter"
	case Backspace:
		return "Backspace"
	case Tab:
		return "Tab"
	}
	return fmt.Sprintf("Key(%d)", int(k))
}

// Keyboard types into the focused window.
type Keyboard interface {
	// Name says which backend this is ("xdotool", "wtype", …).
	Name() string
	// Type types s, which holds no control characters (see Clean).
	Type(ctx context.Context, s string) error
	// Press presses and releases k n times.
	Press(ctx context.Context, k Key, n int) error
}

// Options choose a Keyboard. The zero value picks the platform's own.
type Options struct {
	// Backend is "" (or "auto") for the platform's choice, or one of
	// Backends() to insist on it.
	Backend string
	// Getenv and LookPath stand in for os.Getenv and exec.LookPath (tests).
	Getenv   func(string) string
	LookPath func(string) (string, error)
	// openX11 connects to an X display (tests stand in for it).
	openX11 func(display string) (Keyboard, error)
}

func (o *Options) fill() {
	if o.openX11 == nil {
		o.openX11 = defaultOpenX11
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
}

// Unavailable says why no backend can type here and what to install.
type Unavailable struct {
	Why  string
	Hint string
}

func (e *Unavailable) Error() string {
	if e.Hint == "" {
		return e.Why
	}
	return e.Why + ": " + e.Hint
}

// tools are the backends that run a program, by name.
var tools = map[string]func(path string) Keyboard{
	"xdotool":   func(p string) Keyboard { return &xdotool{path: p} },
	"wtype":     func(p string) Keyboard { return &wtype{path: p} },
	"osascript": func(p string) Keyboard { return &osascript{path: p} },
}

// sessionVar is the variable naming the session a tool types into.
var sessionVar = map[string]string{"xdotool": "DISPLAY", "wtype": "WAYLAND_DISPLAY"}

// installHint says how to get each tool.
var installHint = map[string]string{
	"xdotool":   "install xdotool (Debian/Ubuntu: sudo apt install xdotool; Fedora: sudo dnf install xdotool; Arch: sudo pacman -S xdotool)",
	"wtype":     "install wtype (Debian/Ubuntu: sudo apt install wtype; Fedora: sudo dnf install wtype; Arch: sudo pacman -S wtype); it needs a compositor with the virtual-keyboard protocol (sway, Hyprland, KDE Plasma); GNOME has none, type into X11 (XWayland) windows with xdotool there",
	"osascript": "osascript is part of macOS; it should be at /usr/bin/osascript",
}

// Backends lists the names Options.Backend accepts.
func Backends() []string {
	names := []string{"auto"}
	for n := range tools {
		names = append(names, n)
	}
	names = append(names, platformBackends...)
	sort.Strings(names[1:])
	return names
}

// New returns the Keyboard o asks for.
func New(o Options) (Keyboard, error) {
	o.fill()
	switch o.Backend {
	case "", "auto":
		return detect(o)
	}
	if mk, ok := tools[o.Backend]; ok {
		kb, err := tool(o, o.Backend, mk)
		if v := sessionVar[o.Backend]; err == nil && v != "" && o.Getenv(v) == "" {
			// Over ssh, say: the program is there, but every message
			// would fail to type.
			return nil, &Unavailable{Why: o.Backend + " types into a graphical session, and " + v + " is not set",
				Hint: "run agentassistant-input inside your desktop session (or set " + v + " to its display)"}
		}
		return kb, err
	}
	if kb, ok, err := platform(o.Backend, o); ok {
		return kb, err
	}
	return nil, fmt.Errorf("unknown typing backend %q (one of %s)", o.Backend, strings.Join(Backends(), ", "))
}

// tool finds the program name on PATH.
func tool(o Options, name string, mk func(string) Keyboard) (Keyboard, error) {
	p, err := o.LookPath(name)
	if err != nil {
		return nil, &Unavailable{Why: name + " was not found on PATH", Hint: installHint[name]}
	}
	return mk(p), nil
}

// Clean makes s safe and uniform to type: line breaks (CRLF, CR, U+2028,
// U+2029) become "\n", and every other control character but tab goes,
// so no text can send Escape, Ctrl-C or a terminal escape sequence to the
// focused window. Invalid UTF-8 is dropped.
func Clean(s string) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.NewReplacer("\r\n", "\n", "\r", "\n", "\u2028", "\n", "\u2029", "\n").Replace(s)
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return -1
		}
		return r
	}, s)
}

// Segment is a piece of text to type, or a key to press.
type Segment struct {
	Text string // when not empty: type this
	Key  Key    // otherwise: press this
}

// Chars is how many characters the segment puts in a text box: what one
// Backspace each erases in a terminal or a plain text field.
func (s Segment) Chars() int {
	if s.Text != "" {
		return utf8.RuneCountInString(s.Text)
	}
	return 1
}

// chunk bounds the text given to one backend call, so that a long
// dictation is typed in pieces that can be cancelled between.
const chunk = 200

// Segments splits cleaned text into what a Keyboard does: text runs of at
// most 200 characters, Enter for each newline, Tab for each tab.
func Segments(s string) []Segment {
	var out []Segment
	var run []rune
	flush := func() {
		if len(run) > 0 {
			out = append(out, Segment{Text: string(run)})
			run = run[:0]
		}
	}
	for _, r := range s {
		switch r {
		case '\n':
			flush()
			out = append(out, Segment{Key: Enter})
		case '\t':
			flush()
			out = append(out, Segment{Key: Tab})
		default:
			run = append(run, r)
			if len(run) == chunk {
				flush()
			}
		}
	}
	flush()
	return out
}

// Write cleans s and types it on kb, newlines as Enter. done, when not
// nil, is called after each segment is typed, so a caller knows how much
// reached the window when an error stops it halfway.
func Write(ctx context.Context, kb Keyboard, s string, done func(Segment)) error {
	for _, seg := range Segments(Clean(s)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		if seg.Text != "" {
			err = kb.Type(ctx, seg.Text)
		} else {
			err = kb.Press(ctx, seg.Key, 1)
		}
		if err != nil {
			return err
		}
		if done != nil {
			done(seg)
		}
	}
	return nil
}
