//go:build !linux || nopoll

package wsconn

// poller is Linux's epoll set; elsewhere (and built with -tags nopoll,
// to measure what it saves) connections keep their reading
// goroutine.
type poller struct{}

func newPoller() *poller { return nil }

func (p *poller) arm(*Conn) bool { return false }
func (p *poller) forget(*Conn)   {}
func (p *poller) close()         {}
