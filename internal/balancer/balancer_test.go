package balancer

import (
	"bufio"
	"net"
	"testing"
)

// echo serves name to every connection, then closes it.
func echo(t *testing.T, name string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(name + "\n"))
			c.Close()
		}
	}()
	return ln
}

func hello(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	line, _ := bufio.NewReader(c).ReadString('\n')
	return line
}

// TestRoundRobinSkippingTheDead: connections go to each backend in turn;
// one that refuses connections is skipped.
func TestRoundRobinSkippingTheDead(t *testing.T) {
	a, b, c := echo(t, "a"), echo(t, "b"), echo(t, "c")
	lb, err := Start([]string{a.Addr().String(), b.Addr().String(), c.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	var got string
	for range 6 {
		got += hello(t, lb.Addr())
	}
	if got != "a\nb\nc\na\nb\nc\n" {
		t.Fatalf("got %q", got)
	}
	b.Close()
	got = ""
	for range 4 {
		got += hello(t, lb.Addr())
	}
	if got != "a\nc\nc\na\n" && got != "a\nc\na\nc\n" {
		t.Fatalf("with b down: %q", got)
	}
}
