package remoteinput_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/remoteinput"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestHostileServerFrameIsNotDecoded: a server (or what stands between,
// on plain HTTP) that sends the companion a frame of eight million empty
// items, 16 MiB under its frame bound, does not make it decode them
// (some 600 MiB of structs, for every such frame); it says so and goes
// on typing what the next frame asks.
func TestHostileServerFrameIsNotDecoded(t *testing.T) {
	empty := protowire.AppendVarint(protowire.AppendTag(nil, 4, protowire.BytesType), 0) // AskQuestionResponse.contents
	head, _ := proto.Marshal(&pb.WebsocketMessage{Cmd: wire.CmdAskQuestionReplyNotification})
	bomb := protowire.AppendBytes(protowire.AppendTag(head, 4, protowire.BytesType), // WebsocketMessage.AskQuestionResponse
		bytes.Repeat(empty, 8<<20))
	chat, _ := proto.Marshal(&pb.WebsocketMessage{Cmd: wire.CmdChatMessageNotification,
		ChatMessageNotification: &pb.ChatMessageNotification{ChatMessage: &pb.ChatMessage{SenderClientId: "phone", Content: "after the bomb"}}})
	login, _ := proto.Marshal(&pb.WebsocketMessage{Cmd: wire.CmdUserLogin, Nickname: "pc",
		UserLoginResponse: &pb.UserLoginResponse{ClientId: "pc", Success: true}})

	var before, after runtime.MemStats
	sent := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		if _, _, err := conn.ReadMessage(); err != nil { // its login
			return
		}
		go func() { // what it sends back, read and let go
			for {
				if _, _, err := conn.ReadMessage(); err != nil {
					return
				}
			}
		}()
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, f := range [][]byte{login, bomb, chat} {
			if err := conn.WriteMessage(websocket.BinaryMessage, f); err != nil {
				return
			}
		}
		close(sent)
		<-r.Context().Done()
	}))
	defer ts.Close()

	kb := &keyboard{}
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- remoteinput.New(remoteinput.Options{
			URLs: []string{"ws" + strings.TrimPrefix(ts.URL, "http") + "/ws"}, Token: token, Nickname: "pc",
			Keyboard: kb, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		}).Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	<-sent
	typed := ""
	for deadline := time.Now().Add(30 * time.Second); typed == "" && time.Now().Before(deadline); {
		if ops := kb.take(); len(ops) > 0 {
			typed = ops[0]
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.ReadMemStats(&after)
	allocated := (after.TotalAlloc - before.TotalAlloc) >> 20
	t.Logf("a frame of %d KiB: %d MiB allocated until the next was typed (%q)", len(bomb)>>10, allocated, typed)
	if typed != "type after the bomb" {
		t.Fatalf("typed %q after the frame; log:\n%s", typed, logs.String())
	}
	if allocated > 96 {
		t.Errorf("%d MiB allocated for a frame of %d KiB", allocated, len(bomb)>>10)
	}
}
