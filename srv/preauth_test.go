package srv_test

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// rawDial opens a WebSocket on base+path and sends nothing. A refusal
// before the upgrade comes back as its HTTP status.
func rawDial(base, path string) (*websocket.Conn, int, error) {
	ws, resp, err := websocket.DefaultDialer.Dial(strings.Replace(base, "http", "ws", 1)+path, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil {
			return nil, resp.StatusCode, err
		}
		return nil, 0, err
	}
	return ws, http.StatusSwitchingProtocols, nil
}

// frameHeader is the header of a final, masked client frame of n payload
// bytes. The mask key is zero, so the payload goes out as it is.
func frameHeader(op byte, n int) []byte {
	b := []byte{0x80 | op}
	switch {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xffff:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, 0, 0, 0, 0)
}

// closeCode reads until the server closes ws and returns the close code
// (0 when the connection ended without one).
func closeCode(ws *websocket.Conn) int {
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code
			}
			return 0
		}
	}
}

func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestUnauthenticatedSocketsAreBounded is the outside tester's attack:
// 150 WebSockets that never log in, each sending one frame of 4 MiB - 1
// bytes. Past the cap each newcomer evicts the oldest connection still
// waiting (close 1013), every one kept is closed with 1009 as soon as its
// frame header claims more than the pre-login limit, and the server
// allocates a bounded amount of memory for all of it.
func TestUnauthenticatedSocketsAreBounded(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	const n = 150
	frame := append(frameHeader(websocket.TextMessage, 4<<20-1), make([]byte, 4<<20-1)...)
	runtime.GC()
	before := heapAllocs()

	var admitted []*websocket.Conn
	for i := range n {
		path := "/agent/ws"
		if i%2 == 1 {
			path = "/ws"
		}
		ws, status, err := rawDial(base, path)
		if err != nil {
			t.Fatalf("dial %d: %d %v (a newcomer takes the oldest one's place, never refused)", i, status, err)
		}
		admitted = append(admitted, ws)
	}
	// All come from loopback: past the per-address cap each newcomer
	// evicted the oldest still waiting, closed with 1013 (try again later).
	keep := auth.DefaultMaxPendingPerAddr
	for i, ws := range admitted[:n-keep] {
		if c := closeCode(ws); c != websocket.CloseTryAgainLater {
			t.Errorf("connection %d of the flood: close %d, want 1013 (evicted for a newer one)", i, c)
		}
		ws.Close()
	}
	admitted = admitted[n-keep:]
	codes := make([]int, len(admitted))
	var wg sync.WaitGroup
	for i, ws := range admitted {
		wg.Go(func() {
			defer ws.Close()
			nc := ws.NetConn()
			_ = nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			go func() { _, _ = nc.Write(frame) }() // the server may close before taking it all
			codes[i] = closeCode(ws)
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != websocket.CloseMessageTooBig {
			t.Errorf("connection %d: close %d, want 1009 (frame over the pre-login limit)", i, c)
		}
	}
	grew := heapAllocs() - before
	t.Logf("allocated %d KiB", grew>>10)
	if grew > 32<<20 {
		t.Errorf("the server allocated %d MiB for %d unauthenticated connections", grew>>20, n)
	}
	// The places are given back: a new connection is admitted and logs in.
	c, err := wstest.Dial(base, tokA, "after", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Login.GetSuccess() {
		t.Errorf("login after the attack: %v", c.Login)
	}
}

// TestPendingCap: the cap counts connections from before their upgrade
// until they log in or end, on both WebSocket endpoints together; past it
// a newcomer takes the place of the oldest still waiting (of its address,
// else of all), which is closed with 1013.
func TestPendingCap(t *testing.T) {
	pending := auth.NewPending(10, 3)
	_, base := newGuarded(t, srv.Options{Pending: pending})
	var held []*websocket.Conn
	dial := func(path string) *websocket.Conn {
		t.Helper()
		ws, status, err := rawDial(base, path)
		if err != nil {
			t.Fatalf("%s: %d %v", path, status, err)
		}
		held = append(held, ws)
		return ws
	}
	for _, path := range []string{"/ws", "/agent/ws", "/ws"} {
		dial(path)
	}
	// Past the address's cap: the oldest goes.
	dial("/ws")
	if c := closeCode(held[0]); c != websocket.CloseTryAgainLater {
		t.Errorf("the oldest past the cap: close %d, want 1013", c)
	}
	if n := pending.Len(); n != 3 {
		t.Errorf("%d connections counted as waiting to log in, want 3", n)
	}
	// A connection that logs in gives its place back...
	if err := held[1].WriteMessage(websocket.TextMessage, []byte(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"agent","token":"`+tokA+`"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, b, err := held[1].ReadMessage(); err != nil || !strings.Contains(string(b), "relay.joined") {
		t.Fatalf("join: %s %v", b, err)
	}
	if n := pending.Len(); n != 2 {
		t.Errorf("after a join: %d connections counted as waiting to log in, want 2", n)
	}
	// ...and so does one that ends.
	held[2].Close()
	waitFor(t, "the closed connection's place given back", func() bool { return pending.Len() != 2 })
	// Logged-in connections never count.
	login(t, base, tokA, "in")
	// The login's place is given back as the server marks it active, just
	// after the welcome frame is queued.
	for deadline := time.Now().Add(5 * time.Second); pending.Len() != 1 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := pending.Len(); n != 1 {
		t.Errorf("%d connections counted as waiting to log in, want 1", n)
	}
	for _, ws := range held {
		ws.Close()
	}

	// Past the server's cap, the oldest of all goes.
	_, base2 := newGuarded(t, srv.Options{Pending: auth.NewPending(2, 10)})
	var first *websocket.Conn
	for i := range 3 {
		ws, _, err := rawDial(base2, "/ws")
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		if i == 0 {
			first = ws
		}
	}
	if c := closeCode(first); c != websocket.CloseTryAgainLater {
		t.Errorf("the oldest past the server's cap: close %d, want 1013", c)
	}
}

// TestFloodCannotKeepTheOwnerOut: a local program holding as many
// WebSockets waiting to log in as loopback may have (and Connect calls
// without a token) does not keep the person's own page out: its login
// takes the oldest one's place.
func TestFloodCannotKeepTheOwnerOut(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	for i := range auth.DefaultMaxPendingPerAddr {
		path := "/ws"
		if i%2 == 1 {
			path = "/agent/ws"
		}
		ws, status, err := rawDial(base, path)
		if err != nil {
			t.Fatalf("flood %d: %d %v", i, status, err)
		}
		defer ws.Close()
	}
	for _, path := range []string{"/ws", "/agent/ws"} {
		if path == "/ws" {
			c, err := wstest.Dial(base, tokA, "owner", nil)
			if err != nil {
				t.Fatalf("the owner's page on /ws: %v", err)
			}
			if !c.Login.GetSuccess() {
				t.Errorf("the owner's login: %v", c.Login)
			}
			c.Close()
			continue
		}
		ws, status, err := rawDial(base, path)
		if err != nil {
			t.Fatalf("the owner's page on %s: %d %v", path, status, err)
		}
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"host","token":"`+tokA+`"}}`)); err != nil {
			t.Fatal(err)
		}
		if _, b, err := ws.ReadMessage(); err != nil || !strings.Contains(string(b), "relay.joined") {
			t.Errorf("the owner's host join: %s %v", b, err)
		}
		ws.Close()
	}
}

// TestAgentWSFrameLimitBeforeJoin: before relay.join, /agent/ws takes
// frames of the same small size as /ws before UserLogin; the close comes
// from the frame's header, before its payload is sent.
func TestAgentWSFrameLimitBeforeJoin(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	for _, path := range []string{"/agent/ws", "/ws"} {
		ws, _, err := rawDial(base, path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ws.NetConn().Write(frameHeader(websocket.TextMessage, 100<<10)); err != nil {
			t.Fatal(err)
		}
		if c := closeCode(ws); c != websocket.CloseMessageTooBig {
			t.Errorf("%s: a 100 KiB frame before login closed with %d, want 1009", path, c)
		}
		ws.Close()
	}
	// After the join the relay's own limit applies.
	a := joinAgent(t, base, tokA, "default")
	a.sendJSON(`{"v":"mvp-0.2","type":"agent.message","id":"big","payload":{"text":"` + strings.Repeat("x", 100<<10) + `"}}`)
	a.expectError("NO_ACTIVE_SPEC", "big")
}

// TestOwnerLogsInDuringAFlood is the outside tester's flood: goroutines
// on loopback open WebSockets on /ws and /ingress/ws that never log in,
// as fast as they can, and the owner's devices log in meanwhile. A device
// that presents the token in its upgrade (subprotocol, bearer header or
// ?token=) waits apart from the strangers: every login succeeds at the
// first try, although between each device's upgrade and its login frame
// more strangers arrive than the table holds, which evicts whatever of
// theirs waits.
func TestOwnerLogsInDuringAFlood(t *testing.T) {
	const max, perAddr = 16, 8
	_, base := newGuarded(t, srv.Options{Pending: auth.NewPending(max, perAddr)})
	wsBase := strings.Replace(base, "http", "ws", 1)

	// The flood: bounded in count, and it stops when the owner is done.
	stop := make(chan struct{})
	var flood sync.WaitGroup
	for g := range 4 {
		flood.Go(func() {
			var open []*websocket.Conn
			defer func() {
				for _, ws := range open {
					ws.Close()
				}
			}()
			for i := range 500 {
				select {
				case <-stop:
					return
				default:
				}
				path := "/ws"
				if (g+i)%2 == 1 {
					path = "/ingress/ws"
				}
				ws, _, err := websocket.DefaultDialer.Dial(wsBase+path, nil)
				if err != nil {
					continue // refused while the table turns over: the flood goes on
				}
				if open = append(open, ws); len(open) > 2*perAddr {
					open[0].Close()
					open = open[1:]
				}
			}
		})
	}
	defer func() { close(stop); flood.Wait() }()

	// strangers opens more connections that never log in than the table
	// holds for one address: whatever waited before them is evicted.
	strangers := func() {
		t.Helper()
		for range perAddr + 1 {
			ws, _, err := rawDial(base, "/ws")
			if err != nil {
				t.Fatalf("a stranger's upgrade: %v", err)
			}
			defer ws.Close()
		}
	}
	protocols := http.Header{"Sec-WebSocket-Protocol": {"agentassistant, " + auth.TokenProtocol + base64.RawURLEncoding.EncodeToString([]byte(tokA))}}
	bearer := http.Header{"Authorization": {"Bearer " + tokA}}
	for round := range 3 {
		// /ws, the token in a subprotocol, as the web UI presents it.
		ws, resp, err := websocket.DefaultDialer.Dial(wsBase+"/ws", protocols)
		if err != nil {
			t.Fatalf("round %d: the owner's upgrade on /ws: %v", round, err)
		}
		if p := resp.Header.Get("Sec-WebSocket-Protocol"); p != "agentassistant" {
			t.Errorf("selected subprotocol %q, want agentassistant (never the token's)", p)
		}
		strangers()
		b, _ := protoMarshal(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokA, Nickname: "owner"})
		if err := ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
			t.Fatalf("round %d: /ws login frame: %v", round, err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, data, err := ws.ReadMessage(); err != nil {
			t.Errorf("round %d: the owner's login on /ws: %v", round, err)
		} else if m := new(pb.WebsocketMessage); proto.Unmarshal(data, m) != nil || !m.GetUserLoginResponse().GetSuccess() {
			t.Errorf("round %d: the owner's login on /ws: %v", round, m)
		}
		ws.Close()

		// /ingress/ws, the token in a bearer header, hello after.
		ws, _, err = websocket.DefaultDialer.Dial(wsBase+"/ingress/ws", bearer)
		if err != nil {
			t.Fatalf("round %d: the owner's upgrade on /ingress/ws: %v", round, err)
		}
		strangers()
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"hello","ts":1,"user_id":"u1","api_key":"`+tokA+`"}`)); err != nil {
			t.Fatalf("round %d: hello: %v", round, err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, data, err := ws.ReadMessage(); err != nil || !strings.Contains(string(data), `"hello_ack"`) {
			t.Errorf("round %d: the owner's hello on /ingress/ws: %s %v", round, data, err)
		}
		ws.Close()

		// /agent/ws, the token in ?token=, relay.join after.
		ws, _, err = websocket.DefaultDialer.Dial(wsBase+"/agent/ws?token="+tokA, nil)
		if err != nil {
			t.Fatalf("round %d: the owner's upgrade on /agent/ws: %v", round, err)
		}
		strangers()
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"agent","token":"`+tokA+`"}}`)); err != nil {
			t.Fatalf("round %d: join: %v", round, err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, data, err := ws.ReadMessage(); err != nil || !strings.Contains(string(data), "relay.joined") {
			t.Errorf("round %d: the owner's join on /agent/ws: %s %v", round, data, err)
		}
		ws.Close()
	}
}

// TestUpgradeTokenChecked: a token presented in a WebSocket upgrade is
// checked before the upgrade: a wrong one, or two different ones, counts
// as a failed login (past the budget its upgrade is held back), and the
// connection then logs in with its first frame as one without a token:
// a right token there still gets in, a page with a stale one hears that
// its login was refused.
func TestUpgradeTokenChecked(t *testing.T) {
	lim := auth.NewLimiter(1, time.Hour)
	var held atomic.Int32
	lim.Hold = func(time.Duration, <-chan struct{}) { held.Add(1) }
	_, base := newGuarded(t, srv.Options{Limiter: lim})
	wsBase := strings.Replace(base, "http", "ws", 1)
	n := 0
	for name, h := range map[string]struct {
		query  string
		header http.Header
	}{
		"wrong query":       {query: "?token=wrong-token-000"},
		"wrong bearer":      {header: http.Header{"Authorization": {"Bearer wrong-token-000"}}},
		"wrong subprotocol": {header: http.Header{"Sec-WebSocket-Protocol": {"agentassistant, " + auth.TokenProtocol + base64.RawURLEncoding.EncodeToString([]byte("wrong-token-000"))}}},
		"undecodable":       {header: http.Header{"Sec-WebSocket-Protocol": {"agentassistant, " + auth.TokenProtocol + "!!"}}},
		"two tokens":        {query: "?token=" + tokA, header: http.Header{"Authorization": {"Bearer " + tokB}}},
	} {
		for _, path := range []string{"/ws", "/agent/ws", "/ingress/ws"} {
			ws, _, err := websocket.DefaultDialer.Dial(wsBase+path+h.query, h.header)
			if err != nil {
				t.Fatalf("%s on %s: %v", name, path, err)
			}
			n++
			if path == "/ws" {
				b, _ := protoMarshal(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokA, Nickname: "x"})
				if err := ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
					t.Fatal(err)
				}
				if m := readFrame(t, ws); !m.GetUserLoginResponse().GetSuccess() {
					t.Errorf("%s on /ws, then the right token in UserLogin: %v", name, m)
				}
			}
			ws.Close()
		}
	}
	// The first failure was within the budget of one; each after it held.
	if got := held.Load(); int(got) != n-1 {
		t.Errorf("%d of %d wrong upgrade tokens held back, want %d: each counts as a failed login", got, n, n-1)
	}
}
