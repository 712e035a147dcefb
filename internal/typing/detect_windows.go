package typing

// Windows: SendInput with KEYEVENTF_UNICODE (see sendinput_windows.go).

var platformBackends = []string{"sendinput"}

func platform(name string, _ Options) (Keyboard, bool, error) {
	if name == "sendinput" {
		return sendInput{}, true, nil
	}
	return nil, false, nil
}

func detect(Options) (Keyboard, error) { return sendInput{}, nil }

func defaultOpenX11(string) (Keyboard, error) {
	return nil, &Unavailable{Why: "X11 typing is for Linux and the BSDs"}
}
