// Package faultproxy is a TCP proxy for tests that can delay, hold, cut
// and refuse connections between two processes on loopback.
package faultproxy

import (
	"bytes"
	"context"
	"net"
	"sync"
	"time"
)

// Proxy forwards connections to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	down   bool
	silent bool
	delay  time.Duration
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup

	// held: nothing is forwarded, what comes is kept in order; heldUp is
	// what clients sent meanwhile, for WaitHeld, and moved is closed and
	// made again each time it grows or held changes. cond (on mu) wakes
	// the writers.
	held   bool
	heldUp []byte
	moved  chan struct{}
	cond   *sync.Cond
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{}), moved: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is where clients connect.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetDown cuts every connection (reset) and, while down, closes new ones
// at once; SetDown(false) restores the link.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	p.down = down
	var cut []net.Conn
	if down {
		for c := range p.conns {
			cut = append(cut, c)
		}
	}
	p.mu.Unlock()
	for _, c := range cut {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as a dead link or a killed peer gives
		}
		_ = c.Close()
	}
}

// SetSilent drops everything sent either way while silent, and keeps the
// connections open: a link cut without a word (a partition, a peer
// frozen), which neither side hears of until its own checks notice.
func (p *Proxy) SetSilent(silent bool) {
	p.mu.Lock()
	p.silent = silent
	p.mu.Unlock()
}

// SetDelay adds latency to every chunk forwarded.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// SetHeld holds everything sent either way while held, the connections
// open, and forwards it in order once SetHeld(false): a link stalled, then
// caught up, so that a test orders what one side hears against what it
// sends (a reply it waits for comes after what was held before it).
func (p *Proxy) SetHeld(held bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = held
	p.heldUp = nil
	p.wake()
}

// WaitHeld waits until what the clients sent toward the target while
// held contains s, or ctx ends.
func (p *Proxy) WaitHeld(ctx context.Context, s string) error {
	for {
		p.mu.Lock()
		found, moved := bytes.Contains(p.heldUp, []byte(s)), p.moved
		p.mu.Unlock()
		if found {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// wake tells WaitHeld and the writers that something moved. Called with
// p.mu held.
func (p *Proxy) wake() {
	close(p.moved)
	p.moved = make(chan struct{})
	p.cond.Broadcast()
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.SetHeld(false)
	_ = p.ln.Close()
	p.SetDown(true)
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		if !down {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		p.wg.Go(func() { p.pipe(c) })
	}
}

func (p *Proxy) pipe(c net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		_ = c.Close()
	}()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.conns[up] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, up)
		p.mu.Unlock()
		_ = up.Close()
	}()
	var wg sync.WaitGroup
	// copyDir reads src on its goroutine and writes to dst on another,
	// through a queue, so that a held link keeps reading (for WaitHeld)
	// and forwards what it kept once released.
	copyDir := func(dst, src net.Conn, toTarget bool) {
		var q [][]byte
		done := false
		wg.Go(func() {
			for {
				p.mu.Lock()
				for !done && (len(q) == 0 || p.held) {
					p.cond.Wait()
				}
				if len(q) == 0 { // done, nothing left
					p.mu.Unlock()
					break
				}
				b := q[0]
				q = q[1:]
				p.mu.Unlock()
				if _, err := dst.Write(b); err != nil {
					break
				}
			}
			_ = dst.Close()
			_ = src.Close()
		})
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				d, silent := p.delay, p.silent
				p.mu.Unlock()
				if d > 0 && !silent {
					time.Sleep(d)
				}
				p.mu.Lock()
				if !silent {
					q = append(q, buf[:n])
					if p.held && toTarget {
						p.heldUp = append(p.heldUp, buf[:n]...)
					}
					p.wake()
				}
				p.mu.Unlock()
			}
			if err != nil {
				break
			}
		}
		p.mu.Lock()
		done = true
		p.cond.Broadcast()
		p.mu.Unlock()
	}
	wg.Go(func() { copyDir(up, c, true) })
	wg.Go(func() { copyDir(c, up, false) })
	wg.Wait()
}
