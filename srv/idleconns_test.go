package srv_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// newServed runs the server behind NewHTTPServer, as agentassistant-srv
// does, on a real port, its waiting connections bounded by idle; lim is
// its failed-login limiter (nil: one that never holds a request back).
func newServed(t *testing.T, idle *srv.IdleConns, lim *auth.Limiter) (*srv.Server, string) {
	t.Helper()
	toks, err := auth.NewTokens(tokA, tokB)
	if err != nil {
		t.Fatal(err)
	}
	if lim == nil {
		lim = auth.NewLimiter(1_000_000, time.Minute)
	}
	s := srv.New(srv.Options{Tokens: toks, Idle: idle, Limiter: lim})
	t.Cleanup(func() { _ = s.Close() })
	return s, serveHTTP(t, srv.NewHTTPServer(s.Handler(), srv.HTTPOptions{Idle: s.Idle()}))
}

// serveHTTP serves hs on a real port until the test ends; it returns
// the base URL.
func serveHTTP(t *testing.T, hs *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = hs.Close()
		<-served
	})
	return "http://" + ln.Addr().String()
}

// idleConn makes one public request on a new connection and keeps the
// connection open, idle between keep-alive requests.
func idleConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c := sent(t, addr, "GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the public request closed its connection; the test needs it kept alive")
	}
	return c
}

// slowConn opens a connection that sends part of a request's headers
// and nothing more (slowloris).
func slowConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	return sent(t, addr, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1\r\n")
}

// sent opens a connection to addr, closed when the test ends, and sends
// text on it.
func sent(t *testing.T, addr, text string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, text); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedByServer reports whether the server closed c: a read ends at
// once with EOF or a reset. The deadline only keeps a broken test from
// hanging; nothing is measured by it.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	_, err := c.Read(b[:])
	var ne net.Error
	return err != nil && (!errors.As(err, &ne) || !ne.Timeout())
}

// ownerHealth is the owner's request with the token, on a connection of
// its own; it returns /health's count of waiting connections.
func ownerHealth(t *testing.T, base string) srv.IdleStats {
	t.Helper()
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Get(base + "/health?token=" + tokA)
	if err != nil {
		t.Fatalf("the owner's /health: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the owner's /health: %s", resp.Status)
	}
	var h struct {
		Idle srv.IdleStats `json:"idleConnections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h.Idle
}

// TestIdleFloodCannotLockTheOwnerOut: more idle keep-alive connections
// (one public request each) and more slowloris connections than the
// bound, from one address and without the token: the server never holds
// more of them than the bound, closes the oldest, and the owner's request
// with the token gets through.
func TestIdleFloodCannotLockTheOwnerOut(t *testing.T) {
	const perAddr = 24
	_, base := newServed(t, srv.NewIdleConns(1000, perAddr), nil)
	addr := base[len("http://"):]
	for _, kind := range []struct {
		name string
		dial func(*testing.T, string) net.Conn
	}{{"idle keep-alive", idleConn}, {"slowloris", slowConn}} {
		t.Run(kind.name, func(t *testing.T) {
			const n = 4 * perAddr
			flood := make([]net.Conn, n)
			for i := range flood {
				flood[i] = kind.dial(t, addr)
			}
			st := ownerHealth(t, base) // accepted after every one of the flood
			if st.Peak > perAddr || st.Waiting > perAddr {
				t.Errorf("waiting connections: %+v, bound %d", st, perAddr)
			}
			// The owner's connection took a place too: all but the
			// newest perAddr-1 of the flood are closed.
			for i, c := range flood[:n-perAddr+1] {
				if !closedByServer(c) {
					t.Fatalf("flood connection %d of %d still open: %+v", i, n, st)
				}
			}
			if again := ownerHealth(t, base); again.Peak > perAddr {
				t.Errorf("after the flood: %+v", again)
			}
		})
	}
}

// TestCallsInAHandlerAreNeverEvicted: an agent's call waiting for its
// answer (in a handler) and a logged-in WebSocket (hijacked) are not
// among the waiting connections: a flood that turns the waiting ones over
// many times closes neither, and the answer reaches the agent.
func TestCallsInAHandlerAreNeverEvicted(t *testing.T) {
	const perAddr = 8
	_, base := newServed(t, srv.NewIdleConns(16, perAddr), nil)
	addr := base[len("http://"):]
	ui := login(t, base, tokA, "phone")
	agent := agentassistprotoconnect.NewSrvAgentAssistClient(&http.Client{Transport: &http.Transport{}}, base)
	type result struct {
		r   *pb.AskQuestionResponse
		err error
	}
	asked := make(chan result, 1)
	go func() {
		r, err := agent.AskQuestion(context.Background(), &pb.AskQuestionRequest{ID: "q-1", UserToken: tokA,
			Request: &pb.McpAskQuestionRequest{Question: "Ship it?", Timeout: 600}})
		asked <- result{r, err}
	}()
	expect(t, ui, "AskQuestion") // the call is in its handler
	for range 10 * perAddr {
		idleConn(t, addr)
		slowConn(t, addr)
	}
	if st := ownerHealth(t, base); st.Peak > perAddr || st.Evicted < 19*perAddr {
		t.Errorf("waiting connections: %+v", st)
	}
	if err := ui.Send(wstest.TextReply("q-1", "Ship it.")); err != nil {
		t.Fatal(err)
	}
	res := <-asked
	if res.err != nil {
		t.Fatalf("the waiting call: %v", res.err)
	}
	if got := res.r.GetContents()[0].GetText().GetText(); got != "Ship it." {
		t.Fatalf("the answer: %q", got)
	}
}

// fakeConn is a net.Conn of a given remote address that records its
// closing.
type fakeConn struct {
	net.Conn
	remote string
	mu     sync.Mutex
	closed bool
}

func (c *fakeConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.ParseIP(c.remote), Port: 1234}
}

func (c *fakeConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

func (c *fakeConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// TestIdleConnsEvictTheOldest: past the per-address bound the oldest of
// that address goes, past the total the oldest of all; a connection in a
// handler or hijacked is never counted nor closed; one back from its
// handler waits again, as the newest.
func TestIdleConnsEvictTheOldest(t *testing.T) {
	ic := srv.NewIdleConns(4, 2)
	ctxs := map[*fakeConn]context.Context{}
	open := func(ip string) *fakeConn {
		c := &fakeConn{remote: ip}
		ctxs[c] = ic.ConnContext(context.Background(), c)
		ic.ConnState(c, http.StateNew)
		return c
	}
	closed := func(cs ...*fakeConn) string {
		s := ""
		for _, c := range cs {
			if c.isClosed() {
				s += "x"
			} else {
				s += "."
			}
		}
		return s
	}
	a1, a2 := open("10.0.0.1"), open("10.0.0.1")
	a3 := open("10.0.0.1") // the per-address bound: a1 goes
	if got := closed(a1, a2, a3); got != "x.." {
		t.Fatalf("per address: %s", got)
	}
	ic.ConnState(a1, http.StateClosed)
	b1 := open("10.0.0.2")
	// a2 is in a handler: it does not count and is not closed.
	enter, leave := make(chan struct{}), make(chan struct{})
	h := ic.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(enter)
		<-leave
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil).WithContext(ctxs[a2]))
	}()
	<-enter
	if st := ic.Stats(); st.Waiting != 2 {
		t.Fatalf("with one in a handler: %+v", st)
	}
	b2, c1 := open("10.0.0.2"), open("10.0.0.3")
	c2 := open("10.0.0.3") // the total bound: the oldest of all, a3, goes
	if got := closed(a2, a3, b1, b2, c1, c2); got != ".x...." {
		t.Fatalf("total: %s", got)
	}
	ic.ConnState(a3, http.StateClosed)
	d1 := open("10.0.0.4") // b1 goes; a2 is still in its handler
	if got := closed(a2, b1, b2, c1, c2, d1); got != ".x...." {
		t.Fatalf("with one in a handler: %s", got)
	}
	ic.ConnState(b1, http.StateClosed)
	close(leave)
	<-done // a2 waits again, the newest: b2 makes room
	ic.ConnState(a2, http.StateIdle)
	if got := closed(a2, b2, c1, c2, d1); got != ".x..." {
		t.Fatalf("back from the handler: %s", got)
	}
	ic.ConnState(b2, http.StateClosed)
	ic.ConnState(c1, http.StateHijacked) // a WebSocket: no longer counted
	e1 := open("10.0.0.5")
	if got := closed(a2, c1, c2, d1, e1); got != "....." {
		t.Fatalf("after a hijack: %s", got)
	}
	if st := ic.Stats(); st.Waiting != 4 || st.Peak != 4 || st.Evicted != 4 {
		t.Fatalf("stats: %+v", st)
	}
}

// TestHeldFailuresAreBounded: a request with a wrong token past the
// failure budget is held back in its handler before its 401; held, its
// connection does nothing for anyone and counts as waiting, so a flood of
// failures cannot pile up connections without bound: the oldest held ones
// are closed, and the owner's request gets through at once.
func TestHeldFailuresAreBounded(t *testing.T) {
	heldFailuresBounded(t, "GET /health?token=wrong-token-000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
}

// TestHeldFailuresWithABodyAreLetGo: as TestHeldFailuresAreBounded,
// with a request that has a body the refusal leaves unread (an MCP POST
// with a wrong token). net/http notices no closed connection while a
// body is unread, so the hold must end when its connection is closed to
// make room: held on, each of 20,000 such requests fired from one
// address and closed cost a goroutine and its buffers for the whole hold
// (16,000 goroutines and 250 MB at once), though their connections were
// long gone.
func TestHeldFailuresWithABodyAreLetGo(t *testing.T) {
	heldFailuresBounded(t, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrong-token-000\r\n"+
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
}

// heldFailuresBounded sends, from one address and past the failure
// budget, n of request, whose token is wrong: each is held back while
// its connection lasts. All but perAddr of them must be let go, and the
// owner's request find no more than perAddr connections waiting.
func heldFailuresBounded(t *testing.T, request string) {
	t.Helper()
	const perAddr, n = 8, 32
	lim := auth.NewLimiter(1, time.Minute)
	held, released := make(chan struct{}, n), make(chan struct{}, n)
	lim.Hold = func(_ time.Duration, done <-chan struct{}) {
		held <- struct{}{}
		select {
		case <-done: // as long as the connection lasts
			released <- struct{}{}
		case <-t.Context().Done():
			// The test is over: those still held, their connections
			// closed by the client but their bodies unread, end as a
			// hold's timer would end them.
		}
	}
	_, base := newServed(t, srv.NewIdleConns(1000, perAddr), lim)
	addr := strings.TrimPrefix(base, "http://")
	if _, err := http.Get(base + "/health?token=wrong-token-000"); err != nil { // the budget
		t.Fatal(err)
	}
	for range n {
		sent(t, addr, request)
		<-held
	}
	for i := range n - perAddr {
		select {
		case <-released:
		case <-time.After(10 * time.Second): // only against a hang
			t.Fatalf("%d of %d held failures let go, want %d", i, n, n-perAddr)
		}
	}
	if st := ownerHealth(t, base); st.Peak > perAddr {
		t.Errorf("waiting connections: %+v", st)
	}
}

// TestBodiesBeforeTheTokenAreBounded: a request whose body must be read
// before anyone is known (a notification's capability is in it, a
// webhook's signature is over it) waits for nobody while the body comes:
// a peer that sends the headers and one byte of the body is bounded as
// a slowloris one is, not held in its handler until the body deadline
// (3,000 such connections from one address were all held, 30 s each).
// Each comes once the server reads its body (100 Continue), so none is
// closed before its handler started.
func TestBodiesBeforeTheTokenAreBounded(t *testing.T) {
	const perAddr, n = 8, 32
	_, base := newServed(t, srv.NewIdleConns(1000, perAddr), nil)
	addr := strings.TrimPrefix(base, "http://")
	flood := make([]net.Conn, n)
	for i := range flood {
		c := sent(t, addr, "POST /push/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
			"Content-Length: 1000\r\nExpect: 100-continue\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusContinue {
			t.Fatalf("connection %d: %v %v, want 100 Continue", i, resp, err)
		}
		if _, err := io.WriteString(c, "{"); err != nil {
			t.Fatal(err)
		}
		flood[i] = c
	}
	for i, c := range flood[:n-perAddr] {
		if !closedByServer(c) {
			t.Fatalf("slow body %d of %d still open", i, n)
		}
	}
	if st := ownerHealth(t, base); st.Peak > perAddr {
		t.Errorf("waiting connections: %+v", st)
	}
}

// TestIdleConnsSpareARequestThatArrived: a client reuses its kept-alive
// connection for a POST; the server has read the request's headers
// (StateActive) and is about to hand it to its handler when another
// connection from the same address comes, at the bound. The connection
// no longer waits: its request has arrived whole, and closing it would
// lose a request the client cannot send again (http.Transport retries
// only idempotent ones), as "server closed idle connection" or EOF.
// The newcomer waits, and makes room only once the request is answered
// and its connection waits again.
func TestIdleConnsSpareARequestThatArrived(t *testing.T) {
	idle := srv.NewIdleConns(0, 1)
	hs := srv.NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "taken")
	}), srv.HTTPOptions{Idle: idle})
	// The moment between the request's headers read and its handler,
	// held open: until the newcomer has been counted.
	var (
		mu      sync.Mutex
		reused  net.Conn // the client's connection, server side
		hold    bool
		arrived = make(chan struct{})
		counted = make(chan struct{})
		once    sync.Once
	)
	state := hs.ConnState
	hs.ConnState = func(c net.Conn, st http.ConnState) {
		state(c, st)
		mu.Lock()
		if reused == nil {
			reused = c
		}
		first, held := c == reused, hold && c == reused && st == http.StateActive
		if held {
			hold = false
		}
		mu.Unlock()
		switch {
		case held:
			close(arrived)
			<-counted
		case !first && st == http.StateNew:
			once.Do(func() { close(counted) })
		}
	}
	base := serveHTTP(t, hs)
	// One connection: the second request reuses the first's.
	cl := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	t.Cleanup(cl.CloseIdleConnections)
	post := func() error {
		resp, err := cl.Post(base+"/answer", "text/plain", strings.NewReader("Yes"))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && string(b) != "taken" {
			err = errors.New("answered " + string(b))
		}
		return err
	}
	if err := post(); err != nil {
		t.Fatal(err)
	}
	// The connection waits, kept alive; the client reuses it.
	mu.Lock()
	hold = true
	mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- post() }()
	<-arrived
	newcomer, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer newcomer.Close()
	if err := <-done; err != nil {
		t.Fatalf("the request that had arrived: %v", err)
	}
}
