//go:build !linux

package wsconn

// poller is Linux's epoll set; elsewhere connections keep their reading
// goroutine.
type poller struct{}

func newPoller() *poller { return nil }

func (p *poller) arm(*Conn) bool { return false }
func (p *poller) forget(*Conn)   {}
func (p *poller) close()         {}
