package main

import (
	"net"
	"strconv"
	"strings"
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
