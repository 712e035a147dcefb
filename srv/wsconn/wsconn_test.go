package wsconn

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// pair returns a server-side Conn and the client's end of it.
func pair(t *testing.T, o Options, sndbuf int) (*Conn, *websocket.Conn) {
	t.Helper()
	got := make(chan *Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := Upgrade(w, r, o)
		if err != nil {
			return
		}
		if sndbuf > 0 {
			_ = c.nc.(*net.TCPConn).SetWriteBuffer(sndbuf)
		}
		got <- c
	}))
	t.Cleanup(srv.Close)
	d := websocket.Dialer{ReadBufferSize: 1024}
	cl, _, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	c := <-got
	t.Cleanup(func() { c.Shutdown(CloseNormal, ""); _ = c.nc.Close(); c.writer.Wait() })
	return c, cl
}

func payloadN(i int) []byte {
	sizes := []int{0, 1, 125, 126, 127, 4000, 65535, 65536, 70000}
	return bytes.Repeat([]byte{byte('a' + i%26)}, sizes[i%len(sizes)]+i)
}

func expect(t *testing.T, cl *websocket.Conn, typ, i int) {
	t.Helper()
	_ = cl.SetReadDeadline(time.Now().Add(10 * time.Second))
	mt, b, err := cl.ReadMessage()
	if err != nil {
		t.Fatalf("frame %d: %v", i, err)
	}
	if mt != typ || !bytes.Equal(b, payloadN(i)) {
		t.Fatalf("frame %d: type %d, %d bytes; want type %d, %d bytes", i, mt, len(b), typ, len(payloadN(i)))
	}
}

func TestFramesOfEverySizeArriveWhole(t *testing.T) {
	for _, typ := range []int{websocket.BinaryMessage, websocket.TextMessage} {
		t.Run(fmt.Sprint(typ), func(t *testing.T) {
			c, cl := pair(t, Options{Text: typ == websocket.TextMessage}, 0)
			for i := range 18 {
				if !c.Send(payloadN(i)) {
					t.Fatalf("send %d refused", i)
				}
				expect(t, cl, typ, i)
			}
		})
	}
}

// A peer that does not read fills the socket: what the socket does not take
// is queued, and every frame still arrives whole and in order once it reads.
func TestFramesKeepTheirOrderWhenTheSocketIsFull(t *testing.T) {
	c, cl := pair(t, Options{SendQueue: 10000}, 4096)
	const n = 300
	for i := range n {
		if !c.Send(payloadN(i)) {
			t.Fatalf("send %d refused", i)
		}
	}
	c.mu.Lock()
	queued := len(c.queue)
	c.mu.Unlock()
	if queued == 0 {
		t.Fatal("nothing was queued: the socket never filled, so the test proves nothing")
	}
	for i := range n {
		expect(t, cl, websocket.BinaryMessage, i)
	}
}

func TestAPeerThatNeverReadsIsDisconnected(t *testing.T) {
	c, _ := pair(t, Options{SendQueue: 4}, 4096)
	refused := false
	for i := 0; i < 10000 && !refused; i++ {
		refused = !c.Send(payloadN(7))
	}
	if !refused {
		t.Fatal("the sends never stopped being accepted")
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the slow connection was not shut down")
	}
}

// A write through the writer leaves a deadline on the socket; once it has
// passed, the next direct write must still go out.
func TestADirectWriteAfterAnExpiredDeadline(t *testing.T) {
	c, cl := pair(t, Options{WriteWait: 20 * time.Millisecond}, 0)
	cl.SetPingHandler(func(string) error { return nil })
	c.ping() // written by the writer goroutine, with a deadline
	time.Sleep(60 * time.Millisecond)
	if !c.Send(payloadN(3)) {
		t.Fatal("send refused")
	}
	expect(t, cl, websocket.BinaryMessage, 3)
}

func TestAfterShutdownNothingIsSent(t *testing.T) {
	c, cl := pair(t, Options{}, 0)
	c.Shutdown(websocket.CloseGoingAway, "bye")
	if c.Send(payloadN(1)) {
		t.Fatal("a send after shutdown was accepted")
	}
	_ = cl.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err := cl.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("read %v, want the close frame", err)
	}
}

// Senders on several goroutines while the socket fills: each frame arrives
// whole, and each sender's frames in the order it sent them.
func TestConcurrentSendersWithAFullSocket(t *testing.T) {
	c, cl := pair(t, Options{SendQueue: 100000}, 4096)
	const senders, each = 4, 200
	done := make(chan struct{})
	for s := range senders {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range each {
				body := fmt.Appendf(nil, "%d %d ", s, i)
				body = append(body, bytes.Repeat([]byte{'x'}, (i*997)%9000)...)
				if !c.Send(body) {
					t.Errorf("sender %d: send %d refused", s, i)
					return
				}
			}
		}()
	}
	next := make([]int, senders)
	for range senders * each {
		_ = cl.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, b, err := cl.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		var s, i int
		if _, err := fmt.Sscanf(string(b), "%d %d ", &s, &i); err != nil || s < 0 || s >= senders {
			t.Fatalf("a frame arrived mangled: %.40q", b)
		}
		if i != next[s] {
			t.Fatalf("sender %d: frame %d arrived, want %d", s, i, next[s])
		}
		next[s]++
	}
	for range senders {
		<-done
	}
}

// A sender writing a frame itself counts as a writer: Finish waits for it.
func TestFinishWaitsForASenderWriting(t *testing.T) {
	c, _ := pair(t, Options{WriteWait: 50 * time.Millisecond}, 0)
	inWrite := make(chan struct{})
	var senderDone atomic.Int64
	testHookWroteNow = func() {
		close(inWrite)
		time.Sleep(50 * time.Millisecond)
		senderDone.Store(time.Now().UnixNano())
	}
	defer func() { testHookWroteNow = nil }()
	go c.Send(payloadN(1))
	<-inWrite
	c.Finish()
	if done := senderDone.Load(); done == 0 || done > time.Now().UnixNano() {
		t.Fatal("Finish returned while a sender was still writing")
	}
}

// The pinger's pings are written by the pinger itself when nothing is
// queued: a ping to every connection starts no goroutine per connection.
func TestPingWrittenInline(t *testing.T) {
	c, cl := pair(t, Options{}, 0)
	pinged := make(chan struct{}, 1)
	cl.SetPingHandler(func(string) error { pinged <- struct{}{}; return nil })
	go func() { _, _, _ = cl.ReadMessage() }()
	c.ping()
	c.mu.Lock()
	writing := c.writing
	c.mu.Unlock()
	if writing {
		t.Fatal("a ping to an idle connection started a writer")
	}
	select {
	case <-pinged:
	case <-time.After(5 * time.Second):
		t.Fatal("no ping arrived")
	}
}

// A peer that never reads is cut off once what waits for it exceeds
// SendQueueBytes, long before SendQueue frames of a megabyte each.
func TestAPeerThatNeverReadsHoldsBoundedBytes(t *testing.T) {
	c, _ := pair(t, Options{SendQueue: 256, SendQueueBytes: 4 << 20}, 4096)
	big := bytes.Repeat([]byte{'x'}, 1<<20)
	sent := 0
	for sent < 256 && c.Send(big) {
		sent++
	}
	if sent > 8 {
		t.Fatalf("%d frames of 1 MiB accepted for a peer that reads nothing; the bound is 4 MiB", sent)
	}
	c.mu.Lock()
	held := c.queuedBytes
	c.mu.Unlock()
	// Once it counts as too slow, what was queued for it is let go: at
	// most the rest of the one frame its socket took in part (and the
	// close frame) is still held.
	if held > 1<<20+64 {
		t.Fatalf("%d bytes held for the peer after it was found too slow", held)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the slow connection was not shut down")
	}
}
