// Package balancer is a round-robin TCP load balancer on loopback, for
// the cluster's tests and benchmarks: each new connection goes to the next
// backend that accepts it, and is piped both ways until either side
// closes. What a real balancer (HAProxy, nginx stream, a cloud's) does for
// WebSockets and long HTTP calls, and nothing more.
package balancer

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Balancer is a listener and the goroutines of its connections, which
// Close stops and waits for.
type Balancer struct {
	ln       net.Listener
	backends []string
	next     atomic.Uint64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
}

// Start listens on a free loopback port and balances over backends
// (host:port).
func Start(backends []string) (*Balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Balancer{ln: ln, backends: backends, conns: make(map[net.Conn]struct{})}
	b.wg.Go(b.accept)
	return b, nil
}

// Addr is the address clients connect to.
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

func (b *Balancer) accept() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		if !b.track(c) {
			_ = c.Close()
			return
		}
		b.wg.Go(func() { b.serve(c) })
	}
}

func (b *Balancer) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *Balancer) untrack(c net.Conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	_ = c.Close()
}

// serve pipes c to the next backend that accepts a connection.
func (b *Balancer) serve(c net.Conn) {
	defer b.untrack(c)
	var up net.Conn
	for range b.backends {
		addr := b.backends[(b.next.Add(1)-1)%uint64(len(b.backends))]
		var err error
		if up, err = net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
			break
		}
	}
	if up == nil {
		return // every backend is down: the client sees its connection closed
	}
	if !b.track(up) {
		_ = up.Close()
		return
	}
	defer b.untrack(up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Either side closing ends both: a backend killed mid-call resets
		// its clients, as a real balancer's would.
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

// Close stops listening, closes every connection and waits for their
// goroutines. Idempotent.
func (b *Balancer) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	for c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	err := b.ln.Close()
	b.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
