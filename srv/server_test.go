package srv_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

const (
	tokA = "room-A-token-0001"
	tokB = "room-B-token-0002"
)

func newServer(t *testing.T, io inbox.Options) (*srv.Server, string) {
	t.Helper()
	toks, err := auth.NewTokens(tokA, tokB)
	if err != nil {
		t.Fatal(err)
	}
	s := srv.New(srv.Options{Tokens: toks, Inbox: io})
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.Close()
		ts.Close()
	})
	return s, ts.URL
}

func login(t *testing.T, url, tok, nick string) *wstest.Client {
	t.Helper()
	c, err := wstest.Dial(url, tok, nick, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if !c.Login.GetSuccess() {
		t.Fatalf("login refused: %v", c.Login)
	}
	return c
}

func expect(t *testing.T, c *wstest.Client, cmd string) *pb.WebsocketMessage {
	t.Helper()
	m, err := c.Expect(cmd, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestWrongTokenOnWS(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	for _, tok := range []string{"", "room-A-token-000", "room-A-token-00011", strings.Repeat("a", 5000)} {
		c, err := wstest.Dial(url, tok, "x", nil)
		if err != nil {
			t.Fatalf("token %.20q: %v", tok, err)
		}
		if c.Login.GetSuccess() || c.Login.GetErrorMessage() == "" {
			t.Errorf("token %.20q: login = %v", tok, c.Login)
		}
		err, closed := c.Closed(2 * time.Second)
		var ce *websocket.CloseError
		if !closed || !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation {
			t.Errorf("token %.20q: close = %v %v", tok, err, closed)
		}
		c.Close()
	}
}

func TestLoginDeadlineAndOrder(t *testing.T) {
	_, url := newServer(t, inbox.Options{LoginTimeout: 200 * time.Millisecond})
	ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(url, "http", "ws", 1)+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	// A request before login is refused but the connection stays until
	// the deadline.
	b, _ := protoMarshal(&pb.WebsocketMessage{Cmd: "GetPendingMessages"})
	if err := ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
		t.Fatal(err)
	}
	m := readFrame(t, ws)
	if m.GetError().GetCode() != "not_logged_in" {
		t.Errorf("before login: %v", m)
	}
	_, _, err = ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || ce.Text != "login timeout" {
		t.Errorf("after the login deadline: %v", err)
	}
}

func TestMalformedFramesLeaveEverythingWorking(t *testing.T) {
	s, url := newServer(t, inbox.Options{})
	bad := login(t, url, tokA, "bad")
	good := login(t, url, tokA, "good")
	expect(t, bad, "UserConnectionStatusNotification")

	for _, raw := range [][]byte{
		{0xff, 0xff, 0xff},
		{0x0a, 0x05, 'A', 's'},   // truncated string
		{0x0a, 0x02, 0xc3, 0x28}, // invalid UTF-8 in Cmd
		[]byte(strings.Repeat("\x00", 100)),
	} {
		if err := bad.SendRaw(websocket.BinaryMessage, raw); err != nil {
			t.Fatal(err)
		}
		if e := expect(t, bad, "Error").GetError(); e.GetCode() != "malformed_frame" {
			t.Errorf("frame %x: %v", raw, e)
		}
	}
	if err := bad.SendRaw(websocket.TextMessage, []byte(`{"Cmd":"UserLogin"}`)); err != nil {
		t.Fatal(err)
	}
	if e := expect(t, bad, "Error").GetError(); e.GetCode() != "malformed_frame" {
		t.Errorf("text frame: %v", e)
	}
	for _, m := range []*pb.WebsocketMessage{
		{Cmd: "Explode"},
		{Cmd: "AskQuestionReply"},          // no ID
		{Cmd: "SendChatMessage"},           // no receiver
		{Cmd: "UserLogin", StrParam: tokB}, // already logged in; no room hopping
		{Cmd: "AskQuestionReply", AskQuestionRequest: &pb.AskQuestionRequest{ID: "nope"}},
	} {
		if err := bad.Send(m); err != nil {
			t.Fatal(err)
		}
		e := expect(t, bad, "Error").GetError()
		if e.GetCmd() != m.Cmd || e.GetMessage() == "" {
			t.Errorf("%s: %v", m.Cmd, e)
		}
	}

	// Both connections still work: a request reaches both, an answer lands.
	done := make(chan *hub.Reply, 1)
	go func() {
		r, err := s.Hub().Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q1", Text: "still alive?", Timeout: time.Minute})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	expect(t, good, "AskQuestion")
	expect(t, bad, "AskQuestion")
	if err := bad.Send(wstest.TextReply("q1", "yes")); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.ClientID != bad.ID {
		t.Errorf("answered by %q", r.ClientID)
	}
}

func TestPresenceAndChat(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	a := login(t, url, tokA, "laptop")
	b := login(t, url, tokA, "  phone\x07 ")
	x := login(t, url, tokB, "stranger")

	st := expect(t, a, "UserConnectionStatusNotification").GetUserConnectionStatusNotification()
	if st.GetStatus() != "connected" || st.GetUser().GetNickname() != "phone" || st.GetUser().GetClientId() != b.ID {
		t.Errorf("status = %v", st)
	}
	if err := a.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{UserToken: tokB}}); err != nil {
		t.Fatal(err)
	}
	us := expect(t, a, "GetOnlineUsers").GetGetOnlineUsersResponse()
	if us.GetTotalCount() != 2 || us.GetOnlineUsers()[0].GetNickname() != "laptop" || us.GetOnlineUsers()[1].GetNickname() != "phone" {
		t.Errorf("online users (asking with another token in the body) = %v", us)
	}

	if err := b.Send(&pb.WebsocketMessage{Cmd: "SendChatMessage", SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: a.ID, Content: "dictated on the phone"}}); err != nil {
		t.Fatal(err)
	}
	cm := expect(t, a, "ChatMessageNotification").GetChatMessageNotification().GetChatMessage()
	if cm.GetContent() != "dictated on the phone" || cm.GetSenderClientId() != b.ID || cm.GetSenderNickname() != "phone" ||
		cm.GetReceiverNickname() != "laptop" || cm.GetMessageId() == "" || cm.GetSentAt() == 0 {
		t.Errorf("chat = %v", cm)
	}
	if err := b.Quiet(100 * time.Millisecond); err != nil {
		t.Errorf("sender: %v", err)
	}

	if err := a.Send(&pb.WebsocketMessage{Cmd: "SendChatMessage", SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: x.ID, Content: "across rooms"}}); err != nil {
		t.Fatal(err)
	}
	if e := expect(t, a, "Error").GetError(); e.GetCode() != "receiver_offline" {
		t.Errorf("chat across tokens: %v", e)
	}
	if err := x.Quiet(200 * time.Millisecond); err != nil {
		t.Errorf("other room: %v", err)
	}

	b.Close()
	st = expect(t, a, "UserConnectionStatusNotification").GetUserConnectionStatusNotification()
	if st.GetStatus() != "disconnected" || st.GetUser().GetClientId() != b.ID {
		t.Errorf("status after leave = %v", st)
	}
}

// TestSlowClientDropped: a client that stops reading is disconnected once
// its queue is full; the others keep getting everything.
func TestSlowClientDropped(t *testing.T) {
	s, url := newServer(t, inbox.Options{SendQueue: 4, WriteWait: 200 * time.Millisecond})
	fast := login(t, url, tokA, "fast")
	slow, _, err := websocket.DefaultDialer.Dial(strings.Replace(url, "http", "ws", 1)+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	b, _ := protoMarshal(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokA, Nickname: "slow"})
	if err := slow.WriteMessage(websocket.BinaryMessage, b); err != nil {
		t.Fatal(err)
	}
	// slow never reads again. Send large requests one after another; the
	// fast client reads each before the next.
	big := strings.Repeat("x", 256<<10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 100 {
		go s.Hub().Ask(ctx, tokA, hub.Request{Kind: wire.AskQuestion, ID: fmt.Sprint("flood-", i), Text: big, Timeout: time.Minute})
		expect(t, fast, "AskQuestion")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := fast.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers"}); err != nil {
			t.Fatal(err)
		}
		us := expect(t, fast, "GetOnlineUsers").GetGetOnlineUsersResponse()
		if us.GetTotalCount() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slow client still online: %v", us)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHealthForABalancer: seed 003's health check is a plain
// `curl -f http://host/health`. Without a token /health answers the
// status alone, nothing that would help an attacker; a wrong token is
// still refused (a guess, counted as one); with the token it adds seed
// 003's connections and uptime_seconds to the detail it always gave.
func TestHealthForABalancer(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	login(t, url, tokA, "pc")
	for _, tc := range []struct {
		path, header string
		want         int
	}{
		{"/health", "", http.StatusOK},
		{"/health?token=wrong-token-value", "", http.StatusUnauthorized},
		{"/health", "wrong-token-value", http.StatusUnauthorized},
		{"/health?token=" + tokA, "", http.StatusOK},
		{"/health", tokB, http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", url+tc.path, nil)
		if tc.header != "" {
			req.Header.Set("X-Agentassistant-Token", tc.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s (header %q): %d, want %d", tc.path, tc.header, resp.StatusCode, tc.want)
			continue
		}
		if tc.want != http.StatusOK {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v: %s", tc.path, err, b)
		}
		if tc.path == "/health" && tc.header == "" {
			if len(m) != 1 || m["status"] != "healthy" {
				t.Errorf("/health without the token: %s, want only {\"status\":\"healthy\"}", b)
			}
			continue
		}
		if m["status"] != "healthy" || m["connections"] != 1.0 || m["uptime_seconds"] == nil ||
			m["wsConnections"] != 1.0 || m["uptimeSeconds"] == nil || m["mode"] != "single" {
			t.Errorf("%s with the token: %s", tc.path, b)
		}
	}
	// HEAD, as some balancers check, and a foreign Host are as before.
	resp, err := http.Head(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /health: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", url+"/health", nil)
	req.Host = "evil.example"
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("/health through a foreign Host: %d, want 403", resp.StatusCode)
	}
	req, _ = http.NewRequest("GET", url+"/health", nil)
	req.Header.Set("Origin", "http://evil.example")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("/health from a foreign Origin: %d, want 403", resp.StatusCode)
	}
}
