package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"sync"
)

// openWeb serves -web: it opens the server's web UI, signed in with the
// token, in the person's browser. When it cannot (no token to sign in with,
// no opener, an opener that fails) it says so on stderr, with the address
// to open by hand; so it does on a Linux or BSD machine with no desktop.
// The token itself is never written there: stderr ends up in the MCP
// client's log files.
//
// The opener runs until it exits or ctx ends; wg lets run wait for it.
func openWeb(ctx context.Context, wg *sync.WaitGroup, base url.URL, token, tokenFrom string, logger *slog.Logger) {
	base.Path = "/"
	if token == "" {
		logger.Warn("-web: no token, so the web UI was not opened: set agentassistant_server_token or -token, "+
			"or open the URL agentassistant-srv printed",
			"url", base.String())
		return
	}
	byHand := base.String() + "?token=<token>"
	u := base
	u.RawQuery = url.Values{"token": {token}}.Encode()
	cmd, err := startOpener(ctx, u.String())
	if err != nil {
		logger.Warn("-web: could not open a browser; open the web UI by hand", "url", byHand, "token", tokenFrom, "err", err)
		return
	}
	wg.Go(func() {
		err := cmd.Wait()
		switch {
		case ctx.Err() != nil: // stdio ended first; the opener's outcome no longer matters
		case err != nil:
			logger.Warn("-web: could not open a browser; open the web UI by hand", "url", byHand, "token", tokenFrom,
				"err", fmt.Errorf("%s: %w", cmd.Path, err))
		default:
			logger.Info("-web: opened the web UI in the browser", "url", base.String())
		}
	})
}

// startOpener starts the system's URL opener on the server's own URL
// (built by run, never taken from the network). The child gets no
// stdin/stdout so stdio stays MCP's; it is killed when ctx ends.
func startOpener(ctx context.Context, u string) (*exec.Cmd, error) {
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") {
		return nil, fmt.Errorf("refusing to open %q", u)
	}
	var cmd *exec.Cmd
	// #nosec G204 -- a fixed opener with the server's own http(s) URL, checked above
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.CommandContext(ctx, "open", u) // #nosec G204
	case "windows":
		cmd = exec.CommandContext(ctx, "rundll32", "url.dll,FileProtocolHandler", u) // #nosec G204
	default:
		// With no desktop xdg-open finds no browser to show the page in:
		// it exits, or starts a text browser with no terminal to show.
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return nil, errors.New("no desktop to open a browser on: neither DISPLAY nor WAYLAND_DISPLAY is set")
		}
		cmd = exec.CommandContext(ctx, "xdg-open", u) // #nosec G204
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return cmd, nil
}
