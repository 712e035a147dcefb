package typing

// Windows: SendInput with KEYEVENTF_UNICODE (see sendinput_windows.go).

var platformBackends = []string{"sendinput"}

func platform(name string) (Keyboard, bool) {
	if name == "sendinput" {
		return sendInput{}, true
	}
	return nil, false
}

func detect(Options) (Keyboard, error) { return sendInput{}, nil }
