package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/srv/auth"
)

// runUntil runs agentassistant-mcp with args until its stderr holds want
// (or run ends on its own), then ends stdio and returns all of stderr.
func runUntil(t *testing.T, want string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Chdir(home)
	stdinR, stdinW := io.Pipe()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(t.Context(), args, stdinR, io.Discard, &stderr) }()
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

// TestServerDownSaidAtStart: started while no agentassistant-srv listens
// where it points, agentassistant-mcp says so in the MCP client's log at
// once, with the address and what to do, not only when the agent asks.
func TestServerDownSaidAtStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close() // nothing listens there now
	out := runUntil(t, "not reachable", "-host", "127.0.0.1", "-port", port, "-token", testToken)
	for _, want := range []string{"127.0.0.1:" + port, "start agentassistant-srv", "-port"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr says nothing of %q:\n%s", want, out)
		}
	}
}

// TestWrongTokenSaidAtStart: a server that refuses the token is named at
// start, with where the token came from and how to set the right one.
func TestWrongTokenSaidAtStart(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" && r.Header.Get(auth.TokenHeader) != "" {
			http.Error(w, "missing or invalid token", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	out := runUntil(t, "rejected the token", "-host", host, "-port", port, "-token", testToken)
	for _, want := range []string{"the -token flag", "agentassistant_server_token"} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr says nothing of %q:\n%s", want, out)
		}
	}
}

// TestUnhealthyServerSaidAtStart: a server that runs but can save
// nothing just now (its cluster's NATS away, its disk full: /health 503)
// is named at start with its own reason, not left for the first question
// to find.
func TestUnhealthyServerSaidAtStart(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"status":"unhealthy","reason":"nats: no responders\nforged line"}`)
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	out := runUntil(t, "cannot save questions", "-host", host, "-port", port, "-token", testToken)
	for _, want := range []string{"nats: no responders", srv.URL} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr says nothing of %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\nforged line") {
		t.Errorf("the server's reason starts a line of its own:\n%s", out)
	}
}

// TestNoTokenSaysWhereItLooked: with no token given and no server's
// token file in the user config directory (a server started with -data
// elsewhere, or as another user), the warning names the file it looked
// for and where the token is to be had, not only that calls will fail.
func TestNoTokenSaysWhereItLooked(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	out := runUntil(t, "no token configured", "-host", "127.0.0.1", "-port", port)
	for _, want := range []string{filepath.Join(os.Getenv("HOME"), "agentassistant", "token"), "-data", "?token="} {
		if !strings.Contains(out, want) {
			t.Errorf("stderr says nothing of %q:\n%s", want, out)
		}
	}
}

// TestTerminalSaysWhatItIs: run by hand in a terminal (stdin a character
// device, as /dev/null is too), agentassistant-mcp says it is for an MCP
// client to start and where to register it, instead of waiting in silence.
func TestTerminalSaysWhatItIs(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no /dev/null")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Chdir(home)
	tty, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var stderr syncBuffer
	if err := run(t.Context(), []string{"-host", "127.0.0.1", "-port", "1", "-token", testToken}, tty, io.Discard, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"MCP client", "Register the MCP server"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr says nothing of %q:\n%s", want, stderr.String())
		}
	}
}

// TestHTTPSServerSaidAtStart: a server that serves HTTPS (its -tls-cert,
// as a phone's notifications need) answers plain HTTP with 400; every
// call would fail as "400 Bad Request". agentassistant-mcp says at start
// that the server speaks HTTPS and how to reach it so.
func TestHTTPSServerSaidAtStart(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
	out := runUntil(t, "serves HTTPS", "-host", host, "-port", port, "-token", testToken)
	if want := "-server https://" + net.JoinHostPort(host, port); !strings.Contains(out, want) {
		t.Errorf("stderr says nothing of %q:\n%s", want, out)
	}
}
