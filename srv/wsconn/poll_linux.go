//go:build linux && !nopoll

package wsconn

import (
	"os"
	"runtime"
	"sync"
	"syscall"
)

// poller watches parked connections' sockets with an epoll set of its
// own. The epoll descriptor is itself waited on through the runtime's
// network poller, so the poller's goroutine sleeps like any reader and no
// thread is held; it ends when the set closes it.
type poller struct {
	f    *os.File
	raw  syscall.RawConn
	mu   sync.Mutex
	byID map[int32]*Conn // by the ID in the epoll event's data
	next int32
	done sync.WaitGroup
}

func newPoller() *poller {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return nil
	}
	f := os.NewFile(uintptr(fd), "wsconn-epoll")
	raw, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil
	}
	p := &poller{f: f, raw: raw, byID: make(map[int32]*Conn)}
	p.done.Go(p.run)
	return p
}

// arm asks for one wake when c's socket has something to read (or is
// closed): registered the first time, re-armed after.
func (p *poller) arm(c *Conn) bool {
	p.mu.Lock()
	if c.pollID == 0 {
		for { // the next free ID; they wrap after 2³¹ connections
			p.next++
			if p.next <= 0 {
				p.next = 1
			}
			if p.byID[p.next] == nil {
				break
			}
		}
		c.pollID = p.next
		p.byID[c.pollID] = c
	}
	id := c.pollID
	op := syscall.EPOLL_CTL_MOD
	if !c.armed {
		op = syscall.EPOLL_CTL_ADD
	}
	p.mu.Unlock()
	ev := syscall.EpollEvent{
		Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT,
		Fd:     id,
	}
	var err error
	cerr := p.raw.Control(func(epfd uintptr) {
		err = c.raw.Control(func(fd uintptr) {
			err = syscall.EpollCtl(int(epfd), op, int(fd), &ev)
		})
	})
	if cerr != nil || err != nil {
		return false
	}
	c.armed = true
	return true
}

// forget drops an ended connection. Its socket is closed, which takes it
// out of the epoll set.
func (p *poller) forget(c *Conn) {
	p.mu.Lock()
	delete(p.byID, c.pollID)
	if len(p.byID) == 0 {
		p.byID = make(map[int32]*Conn) // maps never shrink: let a crowd's go
	}
	p.mu.Unlock()
}

func (p *poller) run() {
	events := make([]syscall.EpollEvent, 128)
	woken := make([]*Conn, 0, len(events))
	for {
		var n int
		var werr error
		err := p.raw.Read(func(epfd uintptr) bool {
			n, werr = syscall.EpollWait(int(epfd), events, 0)
			if werr == syscall.EINTR || werr == syscall.EAGAIN {
				n, werr = 0, nil
			}
			return n > 0 || werr != nil // none ready: wait until the epoll descriptor is
		})
		if err != nil || werr != nil {
			return // closed
		}
		p.mu.Lock()
		for _, ev := range events[:n] {
			if c := p.byID[ev.Fd]; c != nil {
				woken = append(woken, c)
			}
		}
		p.mu.Unlock()
		for i, c := range woken {
			c.wake()
			woken[i] = nil
			// Let the reader just started run before starting the next:
			// when a crowd leaves at once, each is done in a moment, and
			// a few goroutines serve them all instead of one each, whose
			// descriptors the runtime would keep.
			runtime.Gosched()
		}
		woken = woken[:0]
	}
}

// close stops the poller; the set calls it once its connections are gone.
func (p *poller) close() {
	_ = p.f.Close()
	p.done.Wait()
}
