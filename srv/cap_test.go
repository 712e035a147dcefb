package srv_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

// TestConnectionCapUnderABurst: logins arriving at the same instant get
// no more connections for a token than its cap.
func TestConnectionCapUnderABurst(t *testing.T) {
	const limit, burst = 2, 48
	_, base := newGuarded(t, srv.Options{Inbox: inbox.Options{MaxPerToken: limit}})
	// A long nickname (cut to 64 characters by the server) makes each
	// login take a while between the check and the join.
	login, _ := protoMarshal(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokA, Nickname: strings.Repeat("ü", 30000)})
	for round := range 4 {
		conns := make([]*websocket.Conn, burst)
		for i := range conns {
			ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(base, "http", "ws", 1)+"/ws", nil)
			if err != nil {
				t.Fatal(err)
			}
			conns[i] = ws
		}
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			won  int
			errs []error
		)
		start := make(chan struct{})
		for _, ws := range conns {
			wg.Go(func() {
				<-start
				if err := ws.WriteMessage(websocket.BinaryMessage, login); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
				for {
					_, b, err := ws.ReadMessage()
					if err != nil {
						mu.Lock()
						errs = append(errs, fmt.Errorf("no login response: %w", err))
						mu.Unlock()
						return
					}
					var m pb.WebsocketMessage
					if err := proto.Unmarshal(b, &m); err != nil || m.Cmd != "UserLogin" {
						continue
					}
					if m.GetUserLoginResponse().GetSuccess() {
						mu.Lock()
						won++
						mu.Unlock()
					}
					return
				}
			})
		}
		close(start)
		wg.Wait()
		for _, ws := range conns {
			ws.Close()
		}
		if len(errs) > 0 {
			t.Fatal(errs[0])
		}
		if won > limit {
			t.Fatalf("round %d: %d of %d simultaneous logins got in under a cap of %d", round, won, burst, limit)
		}
		if won == 0 {
			t.Fatalf("round %d: nobody got in", round)
		}
		waitInboxEmpty(t, base)
	}
}

// waitInboxEmpty waits until no /ws client of tokA is logged in.
func waitInboxEmpty(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, m := call(t, "GET", base+"/internal/sessions/inbox/status", ""); m["connection_count"] == 0.0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the clients never left")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
