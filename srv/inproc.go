package srv

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/srv/rpc"
)

// inProcess serves the server's own handler on an in-memory listener, so
// that code inside the server (the /mcp endpoint's tools) calls the
// Connect services exactly as agentassistant-mcp does over the network:
// the same token check, limits and wire errors, with no port and no TLS.
// Each connection is one end of a net.Pipe; HTTP framing on both sides
// is net/http's.
type inProcess struct {
	conns  chan net.Conn
	quit   chan struct{}
	once   sync.Once
	hs     *http.Server
	served chan struct{} // closed when Serve returned
}

// inProcessURL is the base URL of the in-process services; its host is a
// loopback address, which the Host guard lets through.
const inProcessURL = "http://127.0.0.1"

func newInProcess() *inProcess {
	return &inProcess{conns: make(chan net.Conn), quit: make(chan struct{}), served: make(chan struct{})}
}

// serve serves h until stop.
func (p *inProcess) serve(h http.Handler) {
	p.hs = NewHTTPServer(h, HTTPOptions{})
	// Every call through here is /mcp's: the metrics count it so.
	p.hs.BaseContext = func(net.Listener) context.Context { return rpc.WithDoor(context.Background(), "mcp") }
	go func() {
		defer close(p.served)
		_ = p.hs.Serve(p)
	}()
}

// Client is an HTTP client whose connections reach the handler in
// process.
func (p *inProcess) Client() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         p.dial,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}}
}

func (p *inProcess) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case p.conns <- server:
		return client, nil
	case <-p.quit:
	case <-ctx.Done():
	}
	_ = client.Close()
	_ = server.Close()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, errors.New("dial in-process server: closed")
}

// Accept, Close and Addr make p the server's net.Listener.
func (p *inProcess) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.quit:
		return nil, net.ErrClosed
	}
}

func (p *inProcess) Close() error {
	p.once.Do(func() { close(p.quit) })
	return nil
}

func (p *inProcess) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "in-process" }

// stop closes the listener and every connection, and waits for Serve.
func (p *inProcess) stop() {
	_ = p.hs.Close()
	<-p.served
}
