package wsconn

import (
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gobwas/ws"
)

// handWatcher stands in for the epoll set, which cannot run inside a
// synctest bubble: it parks every connection and wakes none by itself;
// the test wakes a connection before it writes to it, as epoll would on
// the bytes' arrival.
type handWatcher struct{}

func (handWatcher) arm(*Conn) bool { return true }
func (handWatcher) forget(*Conn)   {}

// TestParkedPeerClosedAtItsDeadline: a logged-in peer that reads what it
// is sent but never answers a ping is closed PongWait after its last
// frame, to the second, whatever the phase of the endpoint's ping tick,
// although it is parked (nobody reads it) all along. Seed 003: PongWait
// 60 s, PingInterval 30 s.
func TestParkedPeerClosedAtItsDeadline(t *testing.T) {
	for _, lastAt := range []time.Duration{0, 7 * time.Second, 29 * time.Second, 31 * time.Second} {
		synctest.Test(t, func(t *testing.T) {
			srvEnd, cl := net.Pipe()
			o := Options{PingInterval: 30 * time.Second, PongWait: 60 * time.Second}
			c := New(srvEnd, o)
			c.poll = handWatcher{}
			set := &Set{}
			c.SetState(Active)
			c.KeepAlive()
			if !set.Add(c) {
				t.Fatal("set closed")
			}
			ended := make(chan time.Time, 1)
			msgs := make(chan string, 1)
			go set.Serve(c, Reader{
				Message: func(_ bool, data []byte) bool { msgs <- string(data); return true },
				End:     func() { ended <- time.Now() },
			})
			pings := 0
			peerDone := make(chan struct{})
			go func() { // the peer reads everything and answers nothing
				defer close(peerDone)
				for {
					h, err := ws.ReadHeader(cl)
					if err != nil {
						return
					}
					if _, err := io.CopyN(io.Discard, cl, h.Length); err != nil {
						return
					}
					if h.OpCode == ws.OpPing {
						pings++
					}
				}
			}()
			start := time.Now()
			time.Sleep(time.Second) // past ParkAfter
			synctest.Wait()
			if !c.Parked() {
				t.Fatal("the quiet connection did not park")
			}
			last := start
			if lastAt > 0 {
				time.Sleep(lastAt - time.Second)
				c.wake() // bytes are coming: epoll would say so
				if err := ws.WriteFrame(cl, ws.MaskFrame(ws.NewBinaryFrame([]byte("alive")))); err != nil {
					t.Fatal(err)
				}
				last = time.Now()
				if m := <-msgs; m != "alive" {
					t.Fatalf("message %q", m)
				}
			}
			at := <-ended
			if d := at.Sub(last); d < o.PongWait || d > o.PongWait+time.Second {
				t.Errorf("last frame at %s: closed %s after it, want %s", last.Sub(start), d, o.PongWait)
			}
			<-peerDone
			_ = cl.Close()
			if pings == 0 {
				t.Error("the peer was never pinged")
			}
			set.Close()
		})
	}
}
