// Package faultproxy is a TCP proxy for tests that can delay, cut and
// refuse connections between two processes on loopback.
package faultproxy

import (
	"io"
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
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
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

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
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
	copyDir := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				d, silent := p.delay, p.silent
				p.mu.Unlock()
				if silent {
					continue
				}
				if d > 0 {
					time.Sleep(d)
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = dst.Close()
		_ = src.Close()
	}
	wg.Go(func() { copyDir(up, c) })
	wg.Go(func() { copyDir(c, up) })
	wg.Wait()
	_ = io.EOF
}
