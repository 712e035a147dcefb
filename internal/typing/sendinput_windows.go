package typing

import (
	"context"
	"fmt"
	"unicode/utf16"
	"unsafe"

	"golang.org/x/sys/windows"
)

// sendInput types with SendInput. Text goes as KEYEVENTF_UNICODE events,
// one UTF-16 unit each (a surrogate pair as two), which Windows delivers
// as the characters themselves whatever the keyboard layout or input
// method; Enter, Backspace and Tab go as their virtual keys.
type sendInput struct{}

func (sendInput) Name() string { return "sendinput" }

var procSendInput = windows.NewLazySystemDLL("user32.dll").NewProc("SendInput")

const (
	inputKeyboard    = 1
	keyeventfKeyUp   = 0x0002
	keyeventfUnicode = 0x0004
	vkBack           = 0x08
	vkTab            = 0x09
	vkReturn         = 0x0D
)

// keybdInput is KEYBDINPUT.
type keybdInput struct {
	vk, scan    uint16
	flags, time uint32
	extra       uintptr
}

// input is INPUT holding a KEYBDINPUT. The union's largest member,
// MOUSEINPUT, is 8 bytes longer; Go aligns ki like the C compiler does, so
// the size is 40 bytes on 64-bit Windows and 28 on 32-bit, as SendInput
// checks.
type input struct {
	typ uint32
	ki  keybdInput
	_   [8]byte
}

// Both differences are unsigned constants, so a wrong size fails to compile.
const wantInputSize = 28 + 3*(unsafe.Sizeof(uintptr(0))-4)

var (
	_ [unsafe.Sizeof(input{}) - wantInputSize]byte
	_ [wantInputSize - unsafe.Sizeof(input{})]byte
)

func (s sendInput) Type(ctx context.Context, text string) error {
	var in []input
	for _, u := range utf16.Encode([]rune(text)) {
		in = append(in,
			input{typ: inputKeyboard, ki: keybdInput{scan: u, flags: keyeventfUnicode}},
			input{typ: inputKeyboard, ki: keybdInput{scan: u, flags: keyeventfUnicode | keyeventfKeyUp}})
	}
	return send(ctx, in)
}

func (s sendInput) Press(ctx context.Context, k Key, n int) error {
	vk := map[Key]uint16{Enter: vkReturn, Backspace: vkBack, Tab: vkTab}[k]
	if vk == 0 {
		return fmt.Errorf("press %s: no virtual key", k)
	}
	in := make([]input, 0, 2*n)
	for range n {
		in = append(in,
			input{typ: inputKeyboard, ki: keybdInput{vk: vk}},
			input{typ: inputKeyboard, ki: keybdInput{vk: vk, flags: keyeventfKeyUp}})
	}
	return send(ctx, in)
}

// send hands the events to SendInput in batches, so a long text can be
// cancelled between them.
func send(ctx context.Context, in []input) error {
	for len(in) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := min(len(in), 200)
		r, _, err := procSendInput.Call(uintptr(k), uintptr(unsafe.Pointer(&in[0])), unsafe.Sizeof(in[0]))
		if int(r) != k {
			// UIPI: a window running as administrator refuses input from a
			// program that is not.
			return fmt.Errorf("SendInput took %d of %d events (is the focused window running as administrator?): %w", r, k, err)
		}
		in = in[k:]
	}
	return nil
}
