package inbox_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/pipenet"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

// Two rooms: a client sees only its token's.
const (
	tokA = "token-of-room-a"
	tokB = "token-of-room-b"
)

// wait bounds how long a test waits for a frame. The tests run in
// synctest bubbles, on the bubble's clock: a frame that is coming has
// come once the bubble is idle, and one that is not fails the wait at
// once, in real time.
const wait = time.Minute

// baseURL names a loopback host, as the web UI's does; the connection
// itself is a pipe.
const baseURL = "http://127.0.0.1"

// fixture is /ws on an in-memory network, with a real hub.
type fixture struct {
	hub     *hub.Hub
	handler *inbox.Handler
	dialer  *websocket.Dialer
}

// start serves /ws with o; Hub and Tokens are filled in when nil. Call
// it inside the test's bubble.
func start(t *testing.T, o inbox.Options) *fixture {
	t.Helper()
	if o.Hub == nil {
		o.Hub = hub.New(hub.Options{})
		t.Cleanup(o.Hub.Close) // last
	}
	if o.Tokens == nil {
		tokens, err := auth.NewTokens(tokA, tokB)
		if err != nil {
			t.Fatal(err)
		}
		o.Tokens = tokens
	}
	f := &fixture{hub: o.Hub, handler: inbox.New(o)}
	mux := http.NewServeMux()
	mux.Handle("/ws", f.handler)
	l := pipenet.New()
	hs := &http.Server{Handler: mux}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.Serve(l)
	}()
	t.Cleanup(func() {
		_ = f.handler.Close() // the upgraded connections are the handler's
		_ = hs.Close()
		<-served
	})
	f.dialer = &websocket.Dialer{NetDialContext: l.Dial}
	return f
}

// connect opens /ws without logging in.
func (f *fixture) connect(t *testing.T) *wstest.Client {
	t.Helper()
	c, err := wstest.Connect(f.dialer, baseURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// login opens /ws and logs in; a refused login fails the test.
func (f *fixture) login(t *testing.T, token, nickname string) *wstest.Client {
	t.Helper()
	c := f.connect(t)
	if err := c.LogIn(token, nickname, "", 0); err != nil {
		t.Fatal(err)
	}
	if !c.Login.GetSuccess() {
		t.Fatalf("login refused: %v", c.Login)
	}
	return c
}

// expect is the client's next frame of cmd (presence skipped).
func expect(t *testing.T, c *wstest.Client, cmd string) *pb.WebsocketMessage {
	t.Helper()
	m, err := c.Expect(cmd, wait)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// send writes a frame.
func send(t *testing.T, c *wstest.Client, m *pb.WebsocketMessage) {
	t.Helper()
	if err := c.Send(m); err != nil {
		t.Fatal(err)
	}
}

// closed is how the server ended c: its close frame's code and text.
func closed(t *testing.T, c *wstest.Client) (int, string) {
	t.Helper()
	err, ok := c.Closed(wait)
	if !ok {
		t.Fatal("the connection is still open")
	}
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("closed without a close frame: %v", err)
	}
	return ce.Code, ce.Text
}
