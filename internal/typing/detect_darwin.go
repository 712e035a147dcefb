package typing

// macOS: System Events through osascript (see osascript.go).

var platformBackends []string

func platform(string, Options) (Keyboard, bool, error) { return nil, false, nil }

func detect(o Options) (Keyboard, error) {
	return tool(o, "osascript", tools["osascript"])
}

func defaultOpenX11(string) (Keyboard, error) {
	return nil, &Unavailable{Why: "X11 typing is for Linux and the BSDs"}
}
