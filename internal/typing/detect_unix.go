//go:build !darwin && !windows

package typing

// Linux and the BSDs: wtype under Wayland, xdotool under X11.

var platformBackends []string

func platform(string) (Keyboard, bool) { return nil, false }

func detect(o Options) (Keyboard, error) {
	wayland, x11 := o.Getenv("WAYLAND_DISPLAY") != "", o.Getenv("DISPLAY") != ""
	switch {
	case wayland:
		if kb, err := tool(o, "wtype", tools["wtype"]); err == nil {
			return kb, nil
		}
		if x11 {
			// GNOME has no virtual-keyboard protocol: xdotool through
			// XWayland is all there is, and reaches X11 windows only.
			if kb, err := tool(o, "xdotool", tools["xdotool"]); err == nil {
				return &named{kb, "xdotool (X11 windows only; for Wayland windows " + installHint["wtype"] + ")"}, nil
			}
		}
		return nil, &Unavailable{Why: "this is a Wayland session and wtype is not on PATH", Hint: installHint["wtype"]}
	case x11:
		kb, err := tool(o, "xdotool", tools["xdotool"])
		if err != nil {
			return nil, &Unavailable{Why: "this is an X11 session (DISPLAY=" + o.Getenv("DISPLAY") + ") and xdotool is not on PATH", Hint: installHint["xdotool"]}
		}
		return kb, nil
	}
	return nil, &Unavailable{
		Why:  "no graphical session here: neither WAYLAND_DISPLAY nor DISPLAY is set",
		Hint: "run agentassistant-input inside your desktop session (or set DISPLAY to your X display)",
	}
}

// named is a Keyboard whose Name says more.
type named struct {
	Keyboard
	name string
}

func (n *named) Name() string { return n.name }
