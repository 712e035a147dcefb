package srv_test

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

func health(t *testing.T, base string) (ws int) {
	t.Helper()
	_, m := call(t, "GET", base+"/internal/sessions/inbox/status", "")
	return int(m["connection_count"].(float64))
}

// goroutinesAtRest closes the default client's idle connections and
// waits until no goroutine serves an HTTP connection (those ended, every
// /ws reader ended or parked), then returns how many goroutines there
// are: a count to compare with, free of what connections were still
// finishing. (Clients of earlier tests may keep idle connections of
// their own: those are part of the count, as they stay.)
func goroutinesAtRest(t *testing.T) int {
	t.Helper()
	http.DefaultClient.CloseIdleConnections()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n := runtime.Stack(buf, true)
		for n == len(buf) {
			buf = make([]byte, 2*len(buf))
			n = runtime.Stack(buf, true)
		}
		stacks := string(buf[:n])
		if !strings.Contains(stacks, "net/http.(*conn).serve") {
			return runtime.NumGoroutine()
		}
		if time.Now().After(deadline) {
			t.Fatalf("HTTP connections still served:\n%s", stacks)
		}
	}
}

// TestHeartbeat: a peer that stops answering pings (half-open) is closed
// after PongWait; one that answers stays, however long it is idle.
func TestHeartbeat(t *testing.T) {
	const pingInterval, pongWait = 50 * time.Millisecond, 250 * time.Millisecond
	_, base := newGuarded(t, srv.Options{Inbox: inbox.Options{PingInterval: pingInterval, PongWait: pongWait}})
	alive := login(t, base, tokA, "alive") // its reader answers pings

	ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(base, "http", "ws", 1)+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	b, _ := proto.Marshal(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokA, Nickname: "half-open"})
	if err := ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ws.ReadMessage(); err != nil { // the login response; then silence
		t.Fatal(err)
	}
	if n := health(t, base); n != 2 {
		t.Fatalf("%d connections", n)
	}
	deadline := time.Now().Add(2 * time.Second)
	for health(t, base) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the half-open connection was not closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Several PongWaits go by on the server's clock, counted in the pings
	// alive answers: a server that dropped it would have stopped pinging.
	want := alive.Pings() + 3*int64(pongWait/pingInterval)
	for deadline := time.Now().Add(10 * time.Second); alive.Pings() < want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("alive answered %d pings, want %d: the server stopped pinging it", alive.Pings(), want)
		}
	}
	if err := alive.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers"}); err != nil {
		t.Fatal(err)
	}
	expect(t, alive, "GetOnlineUsers")
}

// TestNoGoroutineLeak: many connect, login, disconnect cycles on both
// WebSocket endpoints leave the goroutine count where it was.
func TestNoGoroutineLeak(t *testing.T) {
	_, base := newGuarded(t, srv.Options{Inbox: inbox.Options{PingInterval: 20 * time.Millisecond}})
	before := goroutinesAtRest(t)
	for i := range 150 {
		c, err := wstest.Dial(base, tokA, fmt.Sprint("cycle", i), nil)
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			_ = c.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers"})
		}
		c.Close()
		a := dialAgent(t, base)
		a.sendJSON(`{"v":"mvp-0.2","type":"relay.join","id":"j","payload":{"role":"agent","token":"` + tokA + `"}}`)
		a.expect("relay.joined")
		a.ws.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		http.DefaultClient.CloseIdleConnections()
		now := runtime.NumGoroutine()
		if now <= before+3 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", now, before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestQuietClientsHoldNoGoroutine: logged-in clients that have gone quiet
// cost no goroutine; they still get broadcasts, and what they send next is
// answered.
func TestQuietClientsHoldNoGoroutine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("parking needs epoll")
	}
	_, base := newGuarded(t, srv.Options{Inbox: inbox.Options{ParkAfter: 20 * time.Millisecond}})
	first := login(t, base, tokA, "first")
	before := goroutinesAtRest(t) // first logged in, its reader parked
	var cs []*wstest.Client
	for i := range 40 {
		cs = append(cs, login(t, base, tokA, fmt.Sprint("quiet", i)))
	}
	// The test's own clients each hold a reader goroutine; the server's
	// should add nothing once its connections are parked.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+len(cs)+3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines with %d quiet clients, %d before", runtime.NumGoroutine(), len(cs), before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range cs {
		if err := first.Send(&pb.WebsocketMessage{Cmd: "SendChatMessage", SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: c.ID, Content: "still there?"}}); err != nil {
			t.Fatal(err)
		}
		if m := expect(t, c, "ChatMessageNotification"); m.GetChatMessageNotification().GetChatMessage().GetContent() != "still there?" {
			t.Fatalf("chat %v", m)
		}
		if err := c.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers"}); err != nil {
			t.Fatal(err)
		}
		for n := int32(0); n != int32(len(cs)+1); { // lists pushed for the crowd's arrival come first
			n = expect(t, c, "GetOnlineUsers").GetGetOnlineUsersResponse().GetTotalCount()
		}
	}
}

// TestLifecycleStates: CREATED on upgrade, AUTHENTICATING once the login
// frame is in, ACTIVE after it; gone from the counts when CLOSED.
func TestLifecycleStates(t *testing.T) {
	_, base := newGuarded(t, srv.Options{Inbox: inbox.Options{LoginTimeout: 5 * time.Second}})
	states := func() map[string]any {
		_, m := call(t, "GET", base+"/health", "")
		return m["wsStates"].(map[string]any)
	}
	ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(base, "http", "ws", 1)+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	waitState := func(name string, n float64) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		count := func() float64 { v, _ := states()[name].(float64); return v }
		for count() != n {
			if time.Now().After(deadline) {
				t.Fatalf("states = %v, want %s=%v", states(), name, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitState("CREATED", 1)
	b, _ := proto.Marshal(&pb.WebsocketMessage{Cmd: "GetOnlineUsers"}) // not a login: still checking
	_ = ws.WriteMessage(websocket.BinaryMessage, b)
	waitState("AUTHENTICATING", 1)
	b, _ = proto.Marshal(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokA})
	_ = ws.WriteMessage(websocket.BinaryMessage, b)
	waitState("ACTIVE", 1)
	ws.Close()
	waitState("ACTIVE", 0)
	// CLOSED is counted for the moment the connection takes to go.
	waitFor(t, "no state counted after the close", func() bool { return len(states()) == 0 })
}
