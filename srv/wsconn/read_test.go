package wsconn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// canPark reports whether this build has a poller (Linux, not built with
// -tags nopoll).
func canPark() bool {
	p := newPoller()
	if p == nil {
		return false
	}
	p.close()
	return true
}

// served is one connection read by a Set, and the client's end.
type served struct {
	c      *Conn
	cl     *websocket.Conn
	set    *Set
	msgs   chan string
	ended  chan struct{}
	timely chan struct{}
}

// wsServer serves upgrades for connections read by Set.Serve, handing
// each new Conn to serve; it returns the ws:// URL.
func wsServer(t *testing.T, o Options, serve func(c *Conn)) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Upgrade(w, r, o)
		if err != nil {
			return
		}
		serve(c)
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// servePair starts a server whose connections are read by Set.Serve and
// logged in at once (Active), and dials it. reply, if set, answers each
// message.
func servePair(t *testing.T, o Options, reply func(c *Conn, data []byte) bool) *served {
	t.Helper()
	s := &served{set: &Set{}, msgs: make(chan string, 64), ended: make(chan struct{}), timely: make(chan struct{}, 1)}
	got := make(chan *Conn, 1)
	url := wsServer(t, o, func(c *Conn) {
		c.SetState(Active)
		c.KeepAlive()
		if !s.set.Add(c) {
			c.Finish()
			return
		}
		got <- c
		s.set.Serve(c, Reader{
			Message: func(text bool, data []byte) bool {
				s.msgs <- string(data)
				if reply != nil {
					return reply(c, data)
				}
				return true
			},
			Timeout: func() { s.timely <- struct{}{} },
			End:     func() { close(s.ended) },
		})
	})
	cl, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	s.c, s.cl = <-got, cl
	t.Cleanup(func() { closeSet(t, s.set) })
	return s
}

// closeSet closes set, failing the test if that does not return.
func closeSet(t *testing.T, set *Set) {
	t.Helper()
	done := make(chan struct{})
	go func() { set.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("Set.Close did not return: a connection was never ended")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

func recv(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message")
		return ""
	}
}

func echo(c *Conn, data []byte) bool { return c.Send(append([]byte("re:"), data...)) }

func readBack(t *testing.T, cl *websocket.Conn) string {
	t.Helper()
	_ = cl.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, b, err := cl.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A quiet connection gives up its goroutine and buffer; a message wakes it.
func TestServeParksAndWakes(t *testing.T) {
	if !canPark() {
		t.Skip("parking needs epoll")
	}
	s := servePair(t, Options{ParkAfter: 20 * time.Millisecond}, echo)
	for i := range 3 {
		want := strings.Repeat("x", i*5000) // 0, 5000 and 10000 bytes: buffer growth
		if err := s.cl.WriteMessage(websocket.BinaryMessage, []byte(want)); err != nil {
			t.Fatal(err)
		}
		if got := recv(t, s.msgs); got != want {
			t.Fatalf("message %d: %d bytes, want %d", i, len(got), len(want))
		}
		if got := readBack(t, s.cl); got != "re:"+want {
			t.Fatalf("reply %d: %.20q", i, got)
		}
		waitFor(t, "the connection parks", s.c.Parked)
		s.c.rmu.Lock()
		buf := s.c.buf
		s.c.rmu.Unlock()
		if buf != nil {
			t.Fatal("a parked connection kept its read buffer")
		}
	}
	// A ping wakes it for the pong only, and it parks again at once.
	pong := make(chan string, 1)
	s.cl.SetPongHandler(func(d string) error { pong <- d; return nil })
	go func() { _, _, _ = s.cl.ReadMessage() }()
	if err := s.cl.WriteControl(websocket.PingMessage, []byte("hi"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-pong:
		if d != "hi" {
			t.Fatalf("pong %q", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no pong")
	}
	waitFor(t, "the connection parks after the ping", s.c.Parked)
}

// Shutting a parked connection down still sends the close frame, ends the
// connection and tells its owner.
func TestServeShutdownWhileParked(t *testing.T) {
	s := servePair(t, Options{ParkAfter: time.Millisecond}, nil)
	if err := s.cl.WriteMessage(websocket.BinaryMessage, []byte("a")); err != nil {
		t.Fatal(err)
	}
	recv(t, s.msgs)
	if canPark() {
		waitFor(t, "the connection parks", s.c.Parked)
	}
	s.cl.SetCloseHandler(func(int, string) error { return nil }) // no echo: the server must end it alone
	s.c.Shutdown(4000, "bye")
	_ = s.cl.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := s.cl.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4000 || ce.Text != "bye" {
		t.Fatalf("read %v, want close 4000 bye", err)
	}
	select {
	case <-s.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the owner was not told the connection ended")
	}
	waitFor(t, "the set is empty", func() bool { return s.set.Len() == 0 })
}

// A parked connection whose peer has gone silent past its deadline is
// ended (by its own timer: nobody reads it).
func TestServeDeadlineWhileParked(t *testing.T) {
	s := servePair(t, Options{ParkAfter: time.Millisecond, PingInterval: 20 * time.Millisecond, PongWait: 80 * time.Millisecond}, nil)
	// The client reads nothing, so it never answers the pings.
	if err := s.cl.WriteMessage(websocket.BinaryMessage, []byte("a")); err != nil {
		t.Fatal(err)
	}
	recv(t, s.msgs)
	select {
	case <-s.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("a silent connection outlived its deadline")
	}
	select {
	case <-s.timely:
	default:
		t.Fatal("the owner's Timeout did not run")
	}
}

// The peer closing ends the connection, and the close is answered.
func TestServePeerCloses(t *testing.T) {
	s := servePair(t, Options{ParkAfter: time.Millisecond}, nil)
	if err := s.cl.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1001, "going"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	_ = s.cl.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := s.cl.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 1001 {
		t.Fatalf("read %v, want the close echoed", err)
	}
	select {
	case <-s.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the owner was not told the connection ended")
	}
}

// A close frame without a status code is answered with one without a
// code too: 1005 means "no code was received" and is never sent (RFC
// 6455 7.4.1), so a browser's ws.close() ends cleanly.
func TestServePeerClosesWithoutACode(t *testing.T) {
	for _, park := range []time.Duration{time.Millisecond, time.Hour} {
		s := servePair(t, Options{ParkAfter: park}, nil)
		nc := s.cl.NetConn()
		if _, err := nc.Write(clientFrame(0x88, nil)); err != nil {
			t.Fatal(err)
		}
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		head := make([]byte, 2)
		if _, err := io.ReadFull(nc, head); err != nil {
			t.Fatal(err)
		}
		if head[0] != 0x88 || head[1] != 0 {
			rest, _ := io.ReadAll(io.LimitReader(nc, int64(head[1]&0x7f)))
			t.Fatalf("answered % x % x, want an empty close frame (88 00)", head, rest)
		}
		select {
		case <-s.ended:
		case <-time.After(5 * time.Second):
			t.Fatal("the owner was not told the connection ended")
		}
	}
}

// Fragmented messages are put together, with pings in between.
func TestServeFragments(t *testing.T) {
	s := servePair(t, Options{}, nil)
	w, err := s.cl.NextWriter(websocket.TextMessage)
	if err != nil {
		t.Fatal(err)
	}
	nc := s.cl.NetConn()
	// gorilla sends a fragment per flush of its buffer; write three.
	for _, part := range []string{"héllo ", strings.Repeat("w", 5000), " end"} {
		if _, err := w.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Close()
	if got := recv(t, s.msgs); got != "héllo "+strings.Repeat("w", 5000)+" end" {
		t.Fatalf("got %d bytes", len(got))
	}
	// By hand: a fragment, a ping in the middle, the last fragment.
	raw := append(clientFrame(0x01, []byte("ab")), clientFrame(0x89, []byte("p"))...)
	raw = append(raw, clientFrame(0x80, []byte("cd"))...)
	if _, err := nc.Write(raw); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, s.msgs); got != "abcd" {
		t.Fatalf("got %q", got)
	}
}

// clientFrame is a masked frame with the given first byte.
func clientFrame(b0 byte, payload []byte) []byte {
	key := []byte{1, 2, 3, 4}
	out := []byte{b0}
	switch n := len(payload); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	case n <= 0xffff:
		out = append(out, 0x80|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, 0x80|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	out = append(out, key...)
	for i, b := range payload {
		out = append(out, b^key[i%4])
	}
	return out
}

// Frames no client may send end the connection with the protocol's close
// code; the connection's owner hears of its end.
func TestServeBadFrames(t *testing.T) {
	cases := []struct {
		name string
		raw  []byte
		code int
	}{
		{"unmasked", []byte{0x82, 0x01, 'a'}, 1002},
		{"reserved bits", clientFrame(0xC2, []byte("a")), 1002},
		{"unknown opcode", clientFrame(0x83, []byte("a")), 1002},
		{"fragmented ping", clientFrame(0x09, []byte("a")), 1002},
		{"long ping", clientFrame(0x89, bytes.Repeat([]byte("a"), 126)), 1002},
		{"continuation first", clientFrame(0x80, []byte("a")), 1002},
		{"message inside a message", append(clientFrame(0x02, []byte("a")), clientFrame(0x82, []byte("b"))...), 1002},
		{"too big", clientFrame(0x82, make([]byte, 2000)), 1009},
		{"too big in pieces", append(clientFrame(0x02, make([]byte, 900)), clientFrame(0x80, make([]byte, 900))...), 1009},
		{"huge length", []byte{0x82, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4}, 1009},
		{"length out of range", []byte{0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}, 1002},
		{"text not UTF-8", clientFrame(0x81, []byte{0xff, 0xfe}), 1007},
		{"bad close code", clientFrame(0x88, []byte{0x03, 0xe7}), 1002},
		{"one-byte close", clientFrame(0x88, []byte{0x03}), 1002},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := servePair(t, Options{}, nil)
			s.c.SetReadLimit(1024)
			if _, err := s.cl.NetConn().Write(tc.raw); err != nil {
				t.Fatal(err)
			}
			_ = s.cl.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _, err := s.cl.ReadMessage()
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != tc.code {
				t.Fatalf("read %v, want close %d", err, tc.code)
			}
			select {
			case <-s.ended:
			case <-time.After(5 * time.Second):
				t.Fatal("the owner was not told the connection ended")
			}
			select {
			case m := <-s.msgs:
				t.Fatalf("a bad frame was delivered: %q", m)
			default:
			}
		})
	}
}

// Many connections parking and waking while frames are sent to them from
// other goroutines, and the set closed with some parked: every message
// arrives, in order, and Close returns.
func TestServeManyParkAndWake(t *testing.T) {
	set := &Set{}
	var mu sync.Mutex
	counts := map[*Conn]int{}
	url := wsServer(t, Options{ParkAfter: time.Millisecond}, func(c *Conn) {
		c.SetState(Active)
		c.KeepAlive()
		if !set.Add(c) {
			c.Finish()
			return
		}
		set.Serve(c, Reader{Message: func(_ bool, data []byte) bool {
			mu.Lock()
			n := counts[c]
			counts[c]++
			mu.Unlock()
			if string(data) != strings.Repeat("m", n%7) {
				c.Send([]byte("out of order"))
			}
			return c.Send(data)
		}})
	})
	const conns, msgs = 20, 30
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for range conns {
		wg.Go(func() {
			cl, _, err := websocket.DefaultDialer.Dial(url, nil)
			if err != nil {
				errs <- err
				return
			}
			defer func() { _ = cl.Close() }()
			for i := range msgs {
				want := strings.Repeat("m", i%7)
				if err := cl.WriteMessage(websocket.BinaryMessage, []byte(want)); err != nil {
					errs <- err
					return
				}
				_ = cl.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, b, err := cl.ReadMessage()
				if err != nil || string(b) != want {
					errs <- errors.New("echo: " + string(b))
					return
				}
				if i%3 == 0 {
					time.Sleep(3 * time.Millisecond) // long enough to park
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	closeSet(t, set)
}

// A connection read by Serve before login (not Active) never parks, and
// its deadline ends it through Timeout.
func TestServeLoginDeadline(t *testing.T) {
	set := &Set{}
	defer set.Close()
	timedOut, ended := make(chan struct{}), make(chan struct{})
	url := wsServer(t, Options{ParkAfter: time.Millisecond}, func(c *Conn) {
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		set.Add(c)
		set.Serve(c, Reader{
			Message: func(bool, []byte) bool { return true },
			Timeout: func() { c.Shutdown(websocket.ClosePolicyViolation, "login timeout"); close(timedOut) },
			End:     func() { close(ended) },
		})
	})
	cl, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Close() }()
	_ = cl.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err = cl.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation {
		t.Fatalf("read %v, want the login timeout close", err)
	}
	for _, ch := range []chan struct{}{timedOut, ended} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("Timeout or End did not run")
		}
	}
}

// Under TLS there is no socket to hand to epoll: the connection keeps its
// reading goroutine, and frames and sends work as on plain TCP.
func TestServeOverTLS(t *testing.T) {
	set := &Set{}
	got := make(chan *Conn, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Upgrade(w, r, Options{ParkAfter: time.Millisecond})
		if err != nil {
			return
		}
		c.SetState(Active)
		c.KeepAlive()
		if !set.Add(c) {
			c.Finish()
			return
		}
		got <- c
		set.Serve(c, Reader{Message: func(_ bool, data []byte) bool { return echo(c, data) }})
	}))
	defer srv.Close()
	d := websocket.Dialer{TLSClientConfig: srv.Client().Transport.(*http.Transport).TLSClientConfig}
	cl, _, err := d.Dial("wss"+strings.TrimPrefix(srv.URL, "https"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Close() }()
	c := <-got
	for i := range 3 {
		want := strings.Repeat("t", i*3000)
		if err := cl.WriteMessage(websocket.BinaryMessage, []byte(want)); err != nil {
			t.Fatal(err)
		}
		if got := readBack(t, cl); got != "re:"+want {
			t.Fatalf("reply %d: %d bytes", i, len(got))
		}
		time.Sleep(5 * time.Millisecond)
		if c.Parked() {
			t.Fatal("a TLS connection was parked")
		}
	}
	_ = cl.Close()
	closeSet(t, set)
}

// A header claiming a huge frame makes the server buffer what arrives,
// not what is claimed.
func TestServeBuffersWhatArrives(t *testing.T) {
	s := servePair(t, Options{}, nil)
	s.c.SetReadLimit(1 << 30)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	head := []byte{0x82, 0xff, 0, 0, 0, 0, 0x3f, 0xff, 0xff, 0xff, 1, 2, 3, 4} // 1 GiB - 1, masked
	if _, err := s.cl.NetConn().Write(append(head, make([]byte, 100)...)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 64<<20 {
		t.Fatalf("the heap grew by %d MiB for a 114-byte claim", grew>>20)
	}
}

// With OwnUTF8 a text message that is not UTF-8 is the owner's to answer
// (the relay's INVALID_MESSAGE): delivered, and the connection stays.
func TestServeOwnUTF8(t *testing.T) {
	s := servePair(t, Options{OwnUTF8: true}, echo)
	if _, err := s.cl.NetConn().Write(clientFrame(0x81, []byte{0xff, 0xfe})); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, s.msgs); got != "\xff\xfe" {
		t.Fatalf("got %q", got)
	}
	if got := readBack(t, s.cl); got != "re:\xff\xfe" {
		t.Fatalf("reply %q", got)
	}
}
