//go:build !darwin && !windows

package typing

import (
	"context"
	"fmt"
	"io"
	"log"
	"sync"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"
)

// xtestKeyboard types on X11 by itself, through the XTEST extension: a
// character on the keyboard map is its key (with Shift when it is the
// shifted one); any other (Chinese, say) is given a free keycode for as
// long as it can keep it.
//
// An X client reads the keyboard map lazily: when it handles a key event
// it asks the server for the map as the map is then, not as it was when
// the key was sent. So a keycode must not be given another character
// while the focused window may still be behind; xdotool remaps one
// keycode for every such character and loses or swaps characters when
// the window lags. Here the free keycodes are used in turn (least
// recently used first), a character keeps its keycode while it is in use,
// and a keycode is given a new character only after it has rested for a
// second.
type xtestKeyboard struct {
	mu    sync.Mutex
	conn  *xgb.Conn
	root  xproto.Window
	first xproto.Keycode
	per   byte            // keysyms per keycode
	syms  []xproto.Keysym // the keyboard map, per keycode from first
	shift xproto.Keycode  // 0: none on the map
	// spares are the keycodes with no symbol, least recently used first.
	spares []xproto.Keycode
	bound  map[xproto.Keysym]xproto.Keycode
	used   map[xproto.Keycode]time.Time
	delay  time.Duration
	rest   time.Duration
	closed bool
}

func init() {
	// xgb logs to the standard logger, e.g. when there is no Xauthority
	// (Xvfb without -auth); what matters comes back as errors.
	xgb.Logger = log.New(io.Discard, "", 0)
}

const (
	keysymShiftL    = 0xffe1
	keysymReturn    = 0xff0d
	keysymBackSpace = 0xff08
	keysymTab       = 0xff09
)

// newXTest connects to the X display and reads its keyboard map.
func newXTest(display string) (Keyboard, error) {
	conn, err := xgb.NewConnDisplay(display)
	if err != nil {
		return nil, &Unavailable{
			Why:  fmt.Sprintf("cannot reach the X display %q: %v", display, err),
			Hint: "run agentassistant-input inside your desktop session, with its DISPLAY (and XAUTHORITY)",
		}
	}
	if err := xtest.Init(conn); err != nil {
		conn.Close()
		return nil, &Unavailable{Why: "the X server has no XTEST extension, which typing needs", Hint: "enable XTEST in the X server's configuration"}
	}
	setup := xproto.Setup(conn)
	k := &xtestKeyboard{
		conn:  conn,
		root:  setup.DefaultScreen(conn).Root,
		first: setup.MinKeycode,
		bound: map[xproto.Keysym]xproto.Keycode{},
		used:  map[xproto.Keycode]time.Time{},
		delay: 4 * time.Millisecond,
		rest:  time.Second,
	}
	count := setup.MaxKeycode - setup.MinKeycode + 1 // X keeps keycodes in 8…255
	m, err := xproto.GetKeyboardMapping(conn, setup.MinKeycode, byte(count)).Reply()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("read the X keyboard map: %w", err)
	}
	k.per, k.syms = m.KeysymsPerKeycode, m.Keysyms
	for i := range int(count) {
		code := k.first + xproto.Keycode(i)
		free := true
		for _, s := range k.symsOf(code) {
			if s == keysymShiftL && k.shift == 0 {
				k.shift = code
			}
			if s != 0 {
				free = false
			}
		}
		if free {
			k.spares = append(k.spares, code)
		}
	}
	return k, nil
}

func (k *xtestKeyboard) Name() string { return "xtest" }

func (k *xtestKeyboard) symsOf(code xproto.Keycode) []xproto.Keysym {
	i := int(code-k.first) * int(k.per)
	return k.syms[i : i+int(k.per)]
}

// keysymOf is the keysym that types r: Latin-1 is its own, the rest of
// Unicode is 0x01000000 + r.
func keysymOf(r rune) xproto.Keysym {
	// #nosec G115 -- a rune of a valid string is within 0…0x10FFFF
	if r >= 0x20 && r <= 0x7e || r >= 0xa0 && r <= 0xff {
		return xproto.Keysym(r)
	}
	return xproto.Keysym(0x01000000 + r) // #nosec G115 -- as above
}

// find returns the key for ks on the map, and whether it needs Shift.
func (k *xtestKeyboard) find(ks xproto.Keysym) (xproto.Keycode, bool, bool) {
	if code, ok := k.bound[ks]; ok {
		return code, false, true
	}
	shifted := xproto.Keycode(0)
	for i := 0; i*int(k.per) < len(k.syms); i++ {
		code := k.first + xproto.Keycode(i)
		s := k.symsOf(code)
		if s[0] == ks {
			return code, false, true
		}
		if k.per > 1 && s[1] == ks && shifted == 0 && k.shift != 0 {
			shifted = code
		}
	}
	return shifted, shifted != 0, shifted != 0
}

// bind gives ks the least recently used free keycode, once it has rested.
func (k *xtestKeyboard) bind(ctx context.Context, ks xproto.Keysym) (xproto.Keycode, error) {
	if len(k.spares) == 0 {
		return 0, fmt.Errorf("no free keycode on the X keyboard map to type %U with", rune(ks&0xffffff))
	}
	code := k.spares[0]
	if wait := k.rest - time.Since(k.used[code]); !k.used[code].IsZero() && wait > 0 {
		if err := sleep(ctx, wait); err != nil {
			return 0, err
		}
	}
	for old, c := range k.bound {
		if c == code {
			delete(k.bound, old)
		}
	}
	syms := make([]xproto.Keysym, int(k.per))
	syms[0] = ks
	if k.per > 1 {
		syms[1] = ks // the same with Shift or Caps Lock
	}
	if err := xproto.ChangeKeyboardMappingChecked(k.conn, 1, code, k.per, syms).Check(); err != nil {
		return 0, fmt.Errorf("map %U on keycode %d: %w", rune(ks&0xffffff), code, err)
	}
	copy(k.symsOf(code), syms)
	k.bound[ks] = code
	return code, nil
}

// touch marks a spare keycode used now and moves it to the back.
func (k *xtestKeyboard) touch(code xproto.Keycode) {
	for i, c := range k.spares {
		if c == code {
			k.spares = append(append(k.spares[:i:i], k.spares[i+1:]...), code)
			k.used[code] = time.Now()
			return
		}
	}
}

func (k *xtestKeyboard) Type(ctx context.Context, s string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, r := range s {
		if err := k.key(ctx, keysymOf(r)); err != nil {
			return err
		}
	}
	return k.sync()
}

func (k *xtestKeyboard) Press(ctx context.Context, key Key, n int) error {
	ks := map[Key]xproto.Keysym{Enter: keysymReturn, Backspace: keysymBackSpace, Tab: keysymTab}[key]
	k.mu.Lock()
	defer k.mu.Unlock()
	for range n {
		if err := k.key(ctx, ks); err != nil {
			return err
		}
	}
	return k.sync()
}

// key presses and releases the key for ks.
func (k *xtestKeyboard) key(ctx context.Context, ks xproto.Keysym) error {
	if k.closed {
		return fmt.Errorf("type: the X connection is closed")
	}
	code, shift, ok := k.find(ks)
	if !ok {
		var err error
		if code, err = k.bind(ctx, ks); err != nil {
			return err
		}
	}
	k.touch(code)
	if shift {
		k.fake(xproto.KeyPress, k.shift)
	}
	k.fake(xproto.KeyPress, code)
	k.fake(xproto.KeyRelease, code)
	if shift {
		k.fake(xproto.KeyRelease, k.shift)
	}
	return sleep(ctx, k.delay)
}

func (k *xtestKeyboard) fake(typ byte, code xproto.Keycode) {
	xtest.FakeInput(k.conn, typ, byte(code), 0, k.root, 0, 0, 0)
}

// sync waits until the server has taken every request (an error among
// them surfaces here), and drops the events the server sent us, such as
// the MappingNotify of our own map changes.
func (k *xtestKeyboard) sync() error {
	if _, err := xproto.GetInputFocus(k.conn).Reply(); err != nil {
		return fmt.Errorf("sync with the X server: %w", err)
	}
	for {
		ev, xerr := k.conn.PollForEvent()
		if xerr != nil {
			return fmt.Errorf("the X server refused a request: %w", xerr)
		}
		if ev == nil {
			return nil
		}
	}
}

// Close gives the keycodes it took back to the map, once they have
// rested (the focused window may not have read the last ones yet), and
// disconnects.
func (k *xtestKeyboard) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	var last time.Time
	for _, code := range k.bound {
		if t := k.used[code]; t.After(last) {
			last = t
		}
	}
	if len(k.bound) > 0 {
		time.Sleep(k.rest - time.Since(last))
		for _, code := range k.bound {
			_ = xproto.ChangeKeyboardMappingChecked(k.conn, 1, code, k.per, make([]xproto.Keysym, int(k.per))).Check()
		}
	}
	k.conn.Close()
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
