package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestPortInUse: a port another program holds (most often an
// agentassistant-srv already running) is refused saying so and what to
// do: use the one running, or pick another port for both binaries.
func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_, _, err = start(t, "", "-port", port)
	if err == nil {
		t.Fatal("started on a port in use")
	}
	for _, want := range []string{"127.0.0.1:" + port + " is in use", "already running", "-port", "agentassistant_server_port", "agentassistant-mcp"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nsays nothing of %q", err, want)
		}
	}
}

// TestHostNotHere: an address this machine does not have (192.0.2.1 is
// documentation's, assigned to no one) is refused saying so and what to
// listen on instead.
func TestHostNotHere(t *testing.T) {
	_, _, err := start(t, "", "-host", "192.0.2.1", "-token", "a-token-of-the-test-0123")
	if err == nil {
		t.Skip("this machine has 192.0.2.1")
	}
	for _, want := range []string{"192.0.2.1 is no address of this machine", "0.0.0.0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nsays nothing of %q", err, want)
		}
	}
}

// TestListenTrouble: a listen's failure is told apart by its errno, the
// unix one or Winsock's (Windows reports those: syscall's EADDRINUSE is
// a value of Go's own there, which no call returns), however wrapped.
func TestListenTrouble(t *testing.T) {
	listen := func(errno syscall.Errno) error {
		return &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", errno)}
	}
	for _, c := range []struct {
		name string
		err  error
		want trouble
	}{
		{"EADDRINUSE", listen(syscall.EADDRINUSE), portInUse},
		{"EADDRNOTAVAIL", listen(syscall.EADDRNOTAVAIL), hostNotHere},
		{"WSAEADDRINUSE", listen(10048), portInUse},      // winerror.h
		{"WSAEADDRNOTAVAIL", listen(10049), hostNotHere}, // winerror.h
		{"EACCES", listen(syscall.EACCES), otherTrouble},
		{"WSAEACCES", listen(10013), otherTrouble},
		{"not a syscall's", errors.New("address 1.2.3.4:99999: invalid port"), otherTrouble},
	} {
		if got := listenTrouble(c.err); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	if err := listenError(listen(10048), "127.0.0.1:22080", "127.0.0.1"); !strings.Contains(err.Error(), "127.0.0.1:22080 is in use") {
		t.Errorf("port in use on Windows: %v", err)
	}
	if err := listenError(listen(10049), "192.0.2.1:22080", "192.0.2.1"); !strings.Contains(err.Error(), "192.0.2.1 is no address of this machine") {
		t.Errorf("host not here on Windows: %v", err)
	}
}

// TestWildcardWithoutTokenNamesTheGeneratedOne: a person who ran the
// server once and now opens it to their phone (-host 0.0.0.0) is told
// how to keep the URL they have: the file that holds the generated
// token, never the token itself.
func TestWildcardWithoutTokenNamesTheGeneratedOne(t *testing.T) {
	dir := t.TempDir()
	const tok = "generated-token-0123456789abcdef"
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "empty.toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	err := run(context.Background(), []string{"-config", cfg, "-data", dir, "-host", "0.0.0.0", "-port", "0"}, &out, &errs)
	if err == nil {
		t.Fatal("started on 0.0.0.0 without a configured token")
	}
	want := `-token "$(cat '` + filepath.Join(dir, "token") + `')"`
	if !strings.Contains(err.Error(), want) || strings.Contains(err.Error()+out.String()+errs.String(), tok) {
		t.Errorf("error %q: want it to name %s and never the token", err, want)
	}
}

// TestWildcardWithoutAnyTokenSaysHowToMakeOne: a newcomer whose first
// start opens it to the phone (-host 0.0.0.0, as the README's push
// section shows) has no generated token to keep: the refusal says how
// to make one, and that the server then prints the URL with it.
func TestWildcardWithoutAnyTokenSaysHowToMakeOne(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "empty.toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	err := run(context.Background(), []string{"-config", cfg, "-data", t.TempDir(), "-host", "0.0.0.0", "-port", "0"}, &out, &errs)
	if err == nil {
		t.Fatal("started on 0.0.0.0 without a configured token")
	}
	want := `-token "$(openssl rand -hex 24)"`
	if runtime.GOOS == "windows" {
		want = `-token ([guid]::NewGuid().ToString('N') + [guid]::NewGuid().ToString('N'))`
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q: want it to say how to make a token, %s", err, want)
	}
}
