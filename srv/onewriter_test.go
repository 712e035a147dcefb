package srv_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/srv/inbox"
	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/agentassistant/agentassistant/srv/wsconn"
)

// pingingPeer is a WebSocket client that pings the server without pause
// while it reads slowly through a small receive buffer, so that the
// server's socket is full whenever it writes, and checks every frame that
// arrives: its framing (RFC 6455, as a client sees it), each pong's
// payload against the pings sent, and each message's content.
type pingingPeer struct {
	t        *testing.T
	nc       net.Conn
	r        io.Reader
	wmu      sync.Mutex
	pings    atomic.Int64 // pings sent; the payload of ping n is "n"
	pongs    atomic.Int64 // pongs received
	lastPong atomic.Int64 // the last pong's number
	msgs     chan []byte
	stop     chan struct{}
	pinger   sync.WaitGroup
	done     sync.WaitGroup // the reader
}

func dialPinging(t *testing.T, base, path string) *pingingPeer {
	t.Helper()
	d := ws.Dialer{Timeout: 5 * time.Second, NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var nd net.Dialer
		c, err := nd.DialContext(ctx, network, addr)
		if err == nil {
			// A small receive window keeps the server's send buffer full.
			_ = c.(*net.TCPConn).SetReadBuffer(16 << 10)
		}
		return c, err
	}}
	nc, br, _, err := d.Dial(context.Background(), strings.Replace(base, "http", "ws", 1)+path)
	if err != nil {
		t.Fatal(err)
	}
	p := &pingingPeer{t: t, nc: nc, r: nc, msgs: make(chan []byte, 1024), stop: make(chan struct{})}
	if br != nil {
		p.r = br
	}
	t.Cleanup(func() { p.close() })
	return p
}

// write sends one masked client frame.
func (p *pingingPeer) write(op ws.OpCode, payload []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	_ = p.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return ws.WriteFrame(p.nc, ws.MaskFrameInPlace(ws.NewFrame(op, true, bytes.Clone(payload))))
}

// start begins pinging and reading.
func (p *pingingPeer) start() {
	p.pinger.Go(p.pingLoop)
	p.done.Go(p.readLoop)
}

func (p *pingingPeer) pingLoop() {
	for {
		select {
		case <-p.stop:
			return
		default:
		}
		n := p.pings.Load() + 1
		if n-p.lastPong.Load() > 150 {
			// 150 unanswered: wait, or the server rightly drops a peer
			// whose pongs pile up unread.
			time.Sleep(100 * time.Microsecond)
			continue
		}
		if err := p.write(ws.OpPing, []byte(strconv.FormatInt(n, 10))); err != nil {
			return
		}
		p.pings.Store(n)
		time.Sleep(5 * time.Millisecond)
	}
}

// slowReader hands out at most 4 KiB per read, pausing before each, and
// once, after the first 128 KiB, stalls for 1.5 s as a phone on a bad
// network might: long enough for any write with a shorter deadline than
// the connection's to run out on the full socket.
type slowReader struct {
	r       io.Reader
	n       *int
	stalled *bool
}

func (s slowReader) Read(b []byte) (int, error) {
	time.Sleep(100 * time.Microsecond)
	if *s.n > 128<<10 && !*s.stalled {
		*s.stalled = true
		time.Sleep(3 * time.Second)
	}
	n, err := s.r.Read(b[:min(len(b), 4096)])
	*s.n += n
	return n, err
}

func (p *pingingPeer) readLoop() {
	defer close(p.msgs)
	var read int
	var stalled bool
	r := slowReader{p.r, &read, &stalled}
	state := ws.StateClientSide
	var msg []byte
	lastPong := int64(0)
	for i := 0; ; i++ {
		h, err := ws.ReadHeader(r)
		if err != nil {
			p.t.Logf("frame %d: %v", i, err)
			return // the connection ended
		}
		if err := ws.CheckHeader(h, state); err != nil {
			p.t.Errorf("frame %d: %v (header %+v): two writers mixed their bytes", i, err, h)
			return
		}
		if h.Length > 1<<20 {
			p.t.Errorf("frame %d: %d bytes claimed: two writers mixed their bytes", i, h.Length)
			return
		}
		payload := make([]byte, h.Length)
		if _, err := io.ReadFull(r, payload); err != nil {
			p.t.Logf("frame %d: payload: %v", i, err)
			return
		}
		switch h.OpCode {
		case ws.OpPong:
			n, err := strconv.ParseInt(string(payload), 10, 64)
			if err != nil || n <= lastPong || n > p.pings.Load() {
				p.t.Errorf("frame %d: pong %q after pong %d, with %d pings sent", i, payload, lastPong, p.pings.Load())
				return
			}
			lastPong = n
			p.lastPong.Store(n)
			p.pongs.Add(1)
		case ws.OpPing:
		case ws.OpClose:
			p.t.Logf("frame %d: close %q", i, payload)
			return
		default:
			msg = append(msg, payload...)
			if h.Fin {
				state = state.Clear(ws.StateFragmented)
				p.msgs <- msg
				msg = nil
			} else {
				state = state.Set(ws.StateFragmented)
			}
		}
	}
}

// lastAnswered stops pinging and waits for the last ping's pong: a pong
// may answer several pings, but the last one is never left unanswered.
func (p *pingingPeer) lastAnswered() {
	p.t.Helper()
	p.stopPinging()
	deadline := time.Now().Add(10 * time.Second)
	for p.lastPong.Load() < p.pings.Load() {
		if time.Now().After(deadline) {
			p.t.Fatalf("ping %d never answered (last pong %d)", p.pings.Load(), p.lastPong.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if p.pongs.Load() == 0 {
		p.t.Fatal("no pong came back: the test proves nothing")
	}
}

// next returns the next message, or nil when the connection ended.
func (p *pingingPeer) next() []byte {
	p.t.Helper()
	select {
	case m := <-p.msgs:
		return m
	case <-time.After(20 * time.Second):
		p.t.Fatal("no message within 20s")
		return nil
	}
}

func (p *pingingPeer) stopPinging() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.pinger.Wait()
}

func (p *pingingPeer) close() {
	p.stopPinging()
	_ = p.nc.Close()
	p.pinger.Wait()
	p.done.Wait()
}

// tokenHeader sends the token in its header, as a client of big messages
// must.
type tokenHeader struct{}

func (tokenHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Agentassistant-Token", tokA)
	return http.DefaultTransport.RoundTrip(r)
}

// bigText is message n's content: long enough to fill any socket buffer,
// and checkable byte for byte.
func bigText(n int) string {
	head := fmt.Sprintf("m%d:", n)
	return head + strings.Repeat(string(rune('a'+n%26)), 96<<10)
}

// Exactly one writer per socket: a client pinging without pause while
// the server writes big frames into its full socket gets every frame
// whole, and well-formed pongs, on /ws ...
func TestOneWriterPerSocketWS(t *testing.T) {
	_, url := newServer(t, inbox.Options{WriteWait: time.Minute})
	p := dialPinging(t, url, "/ws")
	login, _ := proto.Marshal(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokA, Nickname: "pinger"})
	if err := p.write(ws.OpBinary, login); err != nil {
		t.Fatal(err)
	}
	p.start()
	const n = 60
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl := agentassistprotoconnect.NewSrvAgentAssistClient(&http.Client{Transport: tokenHeader{}}, url)
	var asks sync.WaitGroup
	defer asks.Wait()
	defer cancel()
	for i := range n {
		time.Sleep(10 * time.Millisecond) // paced: the socket fills while the client stalls
		asks.Go(func() {
			_, err := cl.AskQuestion(ctx, &pb.AskQuestionRequest{ID: fmt.Sprint("q", i), UserToken: tokA,
				Request: &pb.McpAskQuestionRequest{Question: bigText(i), Timeout: 600}})
			if ctx.Err() == nil {
				t.Logf("ask %d: %v", i, err)
			}
		})
	}
	seen := map[string]bool{}
	for len(seen) < n {
		b := p.next()
		if b == nil {
			t.Fatalf("the connection ended after %d of %d questions", len(seen), n)
		}
		var m pb.WebsocketMessage
		if err := proto.Unmarshal(b, &m); err != nil {
			t.Fatalf("a frame that is no WebsocketMessage (%d bytes): %v", len(b), err)
		}
		if m.Cmd != "AskQuestion" {
			continue
		}
		q := m.GetAskQuestionRequest()
		var i int
		if _, err := fmt.Sscanf(q.GetID(), "q%d", &i); err != nil || q.GetRequest().GetQuestion() != bigText(i) {
			t.Fatalf("question %q arrived mangled", q.GetID())
		}
		seen[q.GetID()] = true
	}
	p.lastAnswered()
	t.Logf("%d pings, %d pongs", p.pings.Load(), p.pongs.Load())
}

// ... and on /agent/ws.
func TestOneWriterPerSocketAgentWS(t *testing.T) {
	url, _ := newRelayServer(t, relay.Options{Conn: wsconn.Options{WriteWait: time.Minute}})
	host, _, err := websocket.DefaultDialer.Dial(strings.Replace(url, "http", "ws", 1)+"/agent/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go func() { // the host reads whatever comes, so its own socket never fills
		for {
			if _, _, err := host.ReadMessage(); err != nil {
				return
			}
		}
	}()
	join := func(role string) []byte {
		return []byte(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"` + role + `","sessionId":"s1","token":"` + tokA + `"}}`)
	}
	if err := host.WriteMessage(websocket.TextMessage, join("host")); err != nil {
		t.Fatal(err)
	}
	p := dialPinging(t, url, "/agent/ws")
	if err := p.write(ws.OpText, join("agent")); err != nil {
		t.Fatal(err)
	}
	p.start()
	for {
		var env struct{ Type string }
		if err := json.Unmarshal(p.next(), &env); err != nil {
			t.Fatal(err)
		}
		if env.Type == "relay.joined" {
			break
		}
	}
	const n = 60
	for i := range n {
		b, _ := json.Marshal(map[string]any{"v": "mvp-0.2", "type": "user.message", "payload": map[string]string{"text": bigText(i)}})
		if err := host.WriteMessage(websocket.TextMessage, b); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond) // paced: the socket fills while the client stalls
	}
	for got := 0; got < n; {
		b := p.next()
		if b == nil {
			t.Fatalf("the connection ended after %d of %d messages", got, n)
		}
		var env struct {
			Type    string
			Payload struct{ Text string }
		}
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatalf("a frame that is no JSON envelope (%d bytes): %v", len(b), err)
		}
		if env.Type != "user.message" {
			continue
		}
		if env.Payload.Text != bigText(got) {
			t.Fatalf("message %d arrived mangled: %.20q", got, env.Payload.Text)
		}
		got++
	}
	p.lastAnswered()
	t.Logf("%d pings, %d pongs", p.pings.Load(), p.pongs.Load())
}
