//go:build !darwin && !windows

package typing

// Linux and the BSDs: XTEST under X11, wtype under Wayland.

var platformBackends = []string{"xtest"}

func platform(name string, o Options) (Keyboard, bool, error) {
	if name != "xtest" {
		return nil, false, nil
	}
	kb, err := o.openX11(o.Getenv("DISPLAY"))
	return kb, true, err
}

func detect(o Options) (Keyboard, error) {
	wayland, x11 := o.Getenv("WAYLAND_DISPLAY") != "", o.Getenv("DISPLAY") != ""
	switch {
	case wayland:
		if kb, err := tool(o, "wtype", tools["wtype"]); err == nil {
			return kb, nil
		}
		if x11 {
			// GNOME has no virtual-keyboard protocol: XTEST through
			// XWayland is all there is, and reaches X11 windows only.
			if kb, err := o.openX11(o.Getenv("DISPLAY")); err == nil {
				return &named{kb, "xtest (X11 windows only; for Wayland windows " + installHint["wtype"] + ")"}, nil
			}
		}
		return nil, &Unavailable{Why: "this is a Wayland session and wtype is not on PATH", Hint: installHint["wtype"]}
	case x11:
		return o.openX11(o.Getenv("DISPLAY"))
	}
	return nil, &Unavailable{
		Why:  "no graphical session here: neither WAYLAND_DISPLAY nor DISPLAY is set",
		Hint: "run agentassistant-input inside your desktop session (or set DISPLAY to your X display)",
	}
}

func defaultOpenX11(display string) (Keyboard, error) { return newXTest(display) }

// named is a Keyboard whose Name says more.
type named struct {
	Keyboard
	name string
}

func (n *named) Name() string { return n.name }

// Close closes the Keyboard inside, when it has anything to close.
func (n *named) Close() error {
	if c, ok := n.Keyboard.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}
