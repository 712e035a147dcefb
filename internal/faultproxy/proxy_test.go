package faultproxy

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// TestHeldForwardsInOrderOnRelease: what a client sends while the link
// is held is read (WaitHeld sees it) and reaches the target, in order,
// once released; so does what came after the release.
func TestHeldForwardsInOrderOnRelease(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	p, err := Start(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	p.SetHeld(true)
	for _, s := range []string{"one ", "two ", "three "} {
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.WaitHeld(ctx, "two three"); err != nil {
		t.Fatalf("WaitHeld: %v", err)
	}
	p.SetHeld(false)
	if _, err := c.Write([]byte("four")); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	if b := <-got; string(b) != "one two three four" {
		t.Fatalf("the target had %q", b)
	}
}
