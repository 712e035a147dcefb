// Package pipenet is an in-memory network for tests: each dial is one end
// of a net.Pipe whose other end the listener's Accept returns. Nothing on
// it waits on the operating system, so a test in a synctest bubble can
// let its calls settle (synctest.Wait) and its timers run on the bubble's
// clock.
package pipenet

import (
	"context"
	"errors"
	"net"
	"sync"
)

// Listener is the network's listening end; Dial is its dialling one.
type Listener struct {
	conns chan net.Conn
	quit  chan struct{}
	once  sync.Once
}

// New returns a listener with nothing dialled yet.
func New() *Listener {
	return &Listener{conns: make(chan net.Conn), quit: make(chan struct{})}
}

// Accept returns the server's end of the next dial.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.quit:
		return nil, net.ErrClosed
	}
}

// Close ends Accept and refuses further dials. Idempotent.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.quit) })
	return nil
}

// Addr is the listener's address, "pipe".
func (l *Listener) Addr() net.Addr { return addr{} }

// Dial connects to the listener, as a DialContext of http.Transport or
// websocket.Dialer: the address given is ignored.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.quit:
	case <-ctx.Done():
	}
	_ = client.Close()
	_ = server.Close()
	return nil, errors.New("dial: the in-memory server is closed")
}

type addr struct{}

func (addr) Network() string { return "pipe" }
func (addr) String() string  { return "pipe" }
