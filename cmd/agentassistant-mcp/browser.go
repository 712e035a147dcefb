package main

import (
	"fmt"
	"net/url"
	"os/exec"
	"runtime"
)

// openBrowser opens the server's own URL (built by run, never taken from
// the network). The child gets no stdin/stdout so stdio stays MCP's.
func openBrowser(u string) error {
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") {
		return fmt.Errorf("refusing to open %q", u)
	}
	var cmd *exec.Cmd
	// #nosec G204 -- a fixed opener with the server's own http(s) URL, checked above
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u) // #nosec G204
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u) // #nosec G204
	default:
		cmd = exec.Command("xdg-open", u) // #nosec G204
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait() //nolint:errcheck // reap the opener; its outcome does not matter
	return nil
}
