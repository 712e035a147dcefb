package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is stderr shared between run's goroutines and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// webEnv gives run a home with no config and no server token, and a PATH
// holding only the opener scripts the test writes.
func webEnv(t *testing.T) (bin string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the openers here are shell scripts")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Chdir(home)
	bin = t.TempDir()
	t.Setenv("PATH", bin)
	t.Setenv("DISPLAY", ":0") // a desktop, unless the test takes it away
	return bin
}

// noDesktop takes the desktop away: neither DISPLAY nor WAYLAND_DISPLAY
// is set, as on a server reached over ssh.
func noDesktop(t *testing.T) {
	t.Helper()
	for _, k := range []string{"DISPLAY", "WAYLAND_DISPLAY"} {
		t.Setenv(k, "") // restored after the test
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
}

func opener() string {
	if runtime.GOOS == "darwin" {
		return "open"
	}
	return "xdg-open"
}

const testToken = "web-test-token-0123456789abcdef"

// runWeb runs agentassistant-mcp -web until stderr contains want (or run
// ends on its own), then ends stdio and returns all of stderr.
func runWeb(t *testing.T, want string, args ...string) string {
	t.Helper()
	stdinR, stdinW := io.Pipe()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(t.Context(), append([]string{"-web", "-host", "127.0.0.1", "-port", "1"}, args...), stdinR, io.Discard, &stderr)
	}()
	// Not a timing assertion: only a bound so a missing line fails the
	// test instead of hanging it.
	giveUp := time.After(30 * time.Second)
	for !strings.Contains(stderr.String(), want) {
		select {
		case err := <-done:
			t.Fatalf("run ended (%v) before stderr said %q:\n%s", err, want, stderr.String())
		case <-giveUp:
			_ = stdinW.Close()
			<-done
			t.Fatalf("stderr never said %q:\n%s", want, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	_ = stdinW.Close()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	out := stderr.String()
	if strings.Contains(out, testToken) {
		t.Fatalf("stderr carries the token:\n%s", out)
	}
	return out
}

func TestWebWithoutOpenerSaysSoWithTheURL(t *testing.T) {
	webEnv(t) // PATH has no opener at all
	out := runWeb(t, "could not open a browser", "-token", testToken)
	for _, want := range []string{"http://127.0.0.1:1/?token=<token>", "-token"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
}

func TestWebOpenerFailureIsReported(t *testing.T) {
	bin := webEnv(t)
	// Like xdg-open on a machine with no browser: it runs, then fails.
	script := "#!/bin/sh\necho 'no method available' >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(bin, opener()), []byte(script), 0o700); err != nil { // #nosec G306 -- a test script
		t.Fatal(err)
	}
	out := runWeb(t, "could not open a browser", "-token", testToken)
	for _, want := range []string{"exit status 3", "http://127.0.0.1:1/?token=<token>"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
}

func TestWebWithoutTokenSaysSoAndOpensNothing(t *testing.T) {
	bin := webEnv(t)
	marker := filepath.Join(bin, "opened")
	script := "#!/bin/sh\n: > '" + marker + "'\n"                                             // builtins only: PATH is bare
	if err := os.WriteFile(filepath.Join(bin, opener()), []byte(script), 0o700); err != nil { // #nosec G306 -- a test script
		t.Fatal(err)
	}
	out := runWeb(t, "-web: no token")
	for _, want := range []string{"http://127.0.0.1:1/", "agentassistant_server_token"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("-web opened a browser with no token to sign in with")
	}
}

func TestWebOpensTheBrowser(t *testing.T) {
	bin := webEnv(t)
	got := filepath.Join(bin, "url")
	script := "#!/bin/sh\nprintf '%s' \"$1\" > '" + got + "'\n"
	if err := os.WriteFile(filepath.Join(bin, opener()), []byte(script), 0o700); err != nil { // #nosec G306 -- a test script
		t.Fatal(err)
	}
	out := runWeb(t, "opened the web UI", "-token", testToken)
	b, err := os.ReadFile(got) // #nosec G304 -- the test's own file
	if err != nil {
		t.Fatalf("the opener was not run: %v\n%s", err, out)
	}
	if want := "http://127.0.0.1:1/?token=" + testToken; string(b) != want {
		t.Fatalf("opened %q, want %q", b, want)
	}
}

// TestWebWithoutDesktopSaysSoWithTheURL: xdg-open is there but no desktop
// is (no DISPLAY, no WAYLAND_DISPLAY): it is not run, where it could only
// exit without a browser, or start a text one with no terminal to show
// it; -web says so with the address to open by hand. macOS has no
// DISPLAY to look at: its opener runs all the same.
func TestWebWithoutDesktopSaysSoWithTheURL(t *testing.T) {
	bin := webEnv(t)
	noDesktop(t)
	marker := filepath.Join(bin, "opened")
	script := "#!/bin/sh\n: > '" + marker + "'\n"                                             // exits 0, as if it had opened
	if err := os.WriteFile(filepath.Join(bin, opener()), []byte(script), 0o700); err != nil { // #nosec G306 -- a test script
		t.Fatal(err)
	}
	if runtime.GOOS == "darwin" {
		runWeb(t, "opened the web UI", "-token", testToken)
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("the opener was not run: %v", err)
		}
		return
	}
	out := runWeb(t, "-web: ", "-token", testToken)
	for _, want := range []string{"could not open a browser", "DISPLAY", "http://127.0.0.1:1/?token=<token>", "-token"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "opened the web UI") {
		t.Errorf("stderr says the web UI was opened:\n%s", out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("-web ran xdg-open with no desktop to open a browser on")
	}
}
