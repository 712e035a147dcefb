package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// wsClient is a bare /ws client: logged in, reading on its own goroutine.
type wsClient struct {
	ws *websocket.Conn
	id string
}

// dialWS logs in and then calls onFrame for every frame until the
// connection ends. onFrame runs on the reading goroutine and may write.
func dialWS(ctx context.Context, s *server, nick string, onFrame func(*wsClient, *pb.WebsocketMessage)) (*wsClient, error) {
	ws, err := dialWebSocket(ctx, clientDialer, strings.Replace(s.url, "http", "ws", 1)+"/ws")
	if err != nil {
		return nil, err
	}
	c := &wsClient{ws: ws}
	b, _ := proto.Marshal(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: s.token, Nickname: nick})
	if err := ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
		_ = ws.Close()
		return nil, err
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			_ = ws.Close()
			return nil, fmt.Errorf("login: %w", err)
		}
		var m pb.WebsocketMessage
		if proto.Unmarshal(data, &m) == nil && m.Cmd == "UserLogin" {
			if !m.GetUserLoginResponse().GetSuccess() {
				_ = ws.Close()
				return nil, fmt.Errorf("login refused: %s", m.GetUserLoginResponse().GetErrorMessage())
			}
			c.id = m.GetUserLoginResponse().GetClientId()
			break
		}
	}
	_ = ws.SetReadDeadline(time.Time{})
	go c.read(onFrame)
	return c, nil
}

// read calls onFrame (if set) for every frame until the connection ends;
// it ends with it.
func (c *wsClient) read(onFrame func(*wsClient, *pb.WebsocketMessage)) {
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		if onFrame == nil {
			continue
		}
		var m pb.WebsocketMessage
		if proto.Unmarshal(data, &m) == nil {
			onFrame(c, &m)
		}
	}
}

// answer replies to a request at once, with a short text.
func answer(c *wsClient, m *pb.WebsocketMessage) {
	var reply *pb.WebsocketMessage
	text := []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "ok"}}}
	switch m.Cmd {
	case "AskQuestion":
		id := m.GetAskQuestionRequest().GetID()
		reply = &pb.WebsocketMessage{Cmd: "AskQuestionReply", AskQuestionRequest: &pb.AskQuestionRequest{ID: id},
			AskQuestionResponse: &pb.AskQuestionResponse{ID: id, Contents: text}}
	case "TaskFinish":
		id := m.GetTaskFinishRequest().GetID()
		reply = &pb.WebsocketMessage{Cmd: "TaskFinishReply", TaskFinishRequest: &pb.TaskFinishRequest{ID: id},
			TaskFinishResponse: &pb.TaskFinishResponse{ID: id, Contents: text}}
	default:
		return
	}
	b, _ := proto.Marshal(reply)
	_ = c.ws.WriteMessage(websocket.BinaryMessage, b)
}

// dialFan connects n clients to the floor's broadcast at path, one after
// another; onFrame runs for every frame on the client's reading goroutine,
// as for the server's clients.
func dialFan(ctx context.Context, path string, n int, onFrame func(*wsClient, *pb.WebsocketMessage)) ([]*wsClient, error) {
	out := make([]*wsClient, 0, n)
	for range n {
		ws, err := dialWebSocket(ctx, clientDialer, "ws://"+fl.addr+path)
		if err != nil {
			closeAll(out)
			return nil, err
		}
		c := &wsClient{ws: ws}
		out = append(out, c)
		go c.read(onFrame)
	}
	return out, nil
}

// clientDialer dials the bench's many clients, with buffers as small as a
// phone's.
var clientDialer = &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 1024, WriteBufferSize: 1024}

// dialWebSocket dials url with d.
func dialWebSocket(ctx context.Context, d *websocket.Dialer, url string) (*websocket.Conn, error) {
	ws, resp, err := d.DialContext(ctx, url, nil)
	if resp != nil {
		_ = resp.Body.Close()
	}
	return ws, err
}
