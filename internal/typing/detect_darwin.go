package typing

// macOS: System Events through osascript (see osascript.go).

var platformBackends []string

func platform(string) (Keyboard, bool) { return nil, false }

func detect(o Options) (Keyboard, error) {
	return tool(o, "osascript", tools["osascript"])
}
