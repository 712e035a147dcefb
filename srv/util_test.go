package srv_test

import (
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/rpc"
)

func protoMarshal(m *pb.WebsocketMessage) ([]byte, error) { return proto.Marshal(m) }

func readFrame(t *testing.T, ws *websocket.Conn) *pb.WebsocketMessage {
	t.Helper()
	_, b, err := ws.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var m pb.WebsocketMessage
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

func rpcOpts(max int) rpc.Options { return rpc.Options{MaxMessage: max} }

// waitFor waits until cond holds; only a hang reaches its bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}
