// Package wstest is a /ws client for tests and benchmarks: it logs in and
// collects the frames the server sends.
package wstest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// Client is a logged-in (or refused) /ws connection.
type Client struct {
	Conn  *websocket.Conn
	ID    string // client_id from UserLoginResponse
	Login *pb.UserLoginResponse
	// ShowsOptions is sent in LogIn: set it to log in as this project's
	// web UI does (a request's options as choices, not in its text).
	ShowsOptions bool
	frames       chan *pb.WebsocketMessage
	readErr      chan error
	writeMu      sync.Mutex
	closeErr     error
	pings        atomic.Int64
}

// Dial connects to baseURL's /ws (http:// or ws://) and sends UserLogin.
// It waits for the UserLoginResponse; a refused login is returned with
// Login.Success false and no error.
func Dial(baseURL, token, nickname string, header http.Header) (*Client, error) {
	return DialResume(baseURL, token, nickname, header, "", 0)
}

// DialResume logs in asking for the events after seq from the server run
// epoch.
func DialResume(baseURL, token, nickname string, header http.Header, epoch string, from uint64) (*Client, error) {
	c, err := Connect(nil, baseURL, header)
	if err != nil {
		return nil, err
	}
	if err := c.LogIn(token, nickname, epoch, from); err != nil {
		_ = c.Conn.Close()
		return nil, err
	}
	return c, nil
}

// Connect opens baseURL's /ws through d (nil: websocket.DefaultDialer,
// else e.g. one whose NetDialContext reaches an in-memory listener) and
// starts collecting frames, without logging in.
func Connect(d *websocket.Dialer, baseURL string, header http.Header) (*Client, error) {
	if d == nil {
		d = websocket.DefaultDialer
	}
	u := strings.Replace(strings.TrimSuffix(baseURL, "/"), "http", "ws", 1) + "/ws"
	conn, resp, err := d.Dial(u, header)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", u, err)
	}
	c := &Client{Conn: conn, frames: make(chan *pb.WebsocketMessage, 1024), readErr: make(chan error, 1)}
	// Set before the reader starts, which calls it: a test waits on the
	// pings answered, the server's own clock, instead of sleeping.
	conn.SetPingHandler(c.pong)
	go c.readLoop()
	return c, nil
}

// pong answers a ping as gorilla's default handler does, and counts it.
func (c *Client) pong(data string) error {
	err := c.Conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	if err == nil {
		c.pings.Add(1)
	}
	var ne net.Error
	if errors.Is(err, websocket.ErrCloseSent) || errors.As(err, &ne) && ne.Timeout() {
		return nil // as gorilla's own handler: the close or the read reports it
	}
	return err
}

// Pings is how many of the server's pings the client has answered.
func (c *Client) Pings() int64 { return c.pings.Load() }

// LogIn sends UserLogin and waits for its answer; a refused login sets
// Login.Success false and is no error.
func (c *Client) LogIn(token, nickname, epoch string, from uint64) error {
	if err := c.Send(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: token, Nickname: nickname, Epoch: epoch, ResumeFrom: from, ShowsOptions: c.ShowsOptions}); err != nil {
		return err
	}
	m, err := c.Expect("UserLogin", 5*time.Second)
	if err != nil {
		return err
	}
	c.Login = m.GetUserLoginResponse()
	c.ID = c.Login.GetClientId()
	return nil
}

func (c *Client) readLoop() {
	for {
		_, data, err := c.Conn.ReadMessage()
		if err != nil {
			c.readErr <- err
			close(c.frames)
			return
		}
		var m pb.WebsocketMessage
		if err := proto.Unmarshal(data, &m); err != nil {
			c.readErr <- fmt.Errorf("server sent an undecodable frame: %w", err)
			close(c.frames)
			return
		}
		c.frames <- &m
	}
}

// Send writes one frame.
func (c *Client) Send(m *pb.WebsocketMessage) error {
	b, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	return c.SendRaw(websocket.BinaryMessage, b)
}

// SendRaw writes bytes as they are, for malformed-input tests.
func (c *Client) SendRaw(typ int, b []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return c.Conn.WriteMessage(typ, b)
}

// Next returns the next frame, whatever it is.
func (c *Client) Next(timeout time.Duration) (*pb.WebsocketMessage, error) {
	select {
	case m, ok := <-c.frames:
		if !ok {
			return nil, fmt.Errorf("connection closed: %w", c.closeError())
		}
		return m, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("no frame within %s", timeout)
	}
}

func (c *Client) closeError() error {
	if c.closeErr == nil {
		c.closeErr = <-c.readErr
	}
	return c.closeErr
}

// Expect returns the next frame with the given Cmd, skipping presence
// notifications (and the online list a crowd's presence comes as) and
// failing on any other frame.
func (c *Client) Expect(cmd string, timeout time.Duration) (*pb.WebsocketMessage, error) {
	deadline := time.Now().Add(timeout)
	for {
		m, err := c.Next(time.Until(deadline))
		if err != nil {
			return nil, fmt.Errorf("waiting for %s: %w", cmd, err)
		}
		if m.Cmd == cmd {
			return m, nil
		}
		if m.Cmd == "UserConnectionStatusNotification" || m.Cmd == "GetOnlineUsers" && m.GetGetOnlineUsersResponse() != nil {
			continue // presence: one by one, or a crowd's as a list
		}
		return nil, fmt.Errorf("waiting for %s: got %s (%v)", cmd, m.Cmd, m)
	}
}

// Quiet reports an error if a frame other than a presence notification
// arrives within d.
func (c *Client) Quiet(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		m, err := c.Next(time.Until(deadline))
		if err != nil {
			if strings.Contains(err.Error(), "no frame within") {
				return nil
			}
			return err
		}
		if m.Cmd != "UserConnectionStatusNotification" {
			return fmt.Errorf("unexpected %s frame: %v", m.Cmd, m)
		}
	}
}

// Closed waits for the server to close the connection and returns the
// read error (a *websocket.CloseError when it sent a close frame).
func (c *Client) Closed(timeout time.Duration) (error, bool) {
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-c.frames:
			if !ok {
				return c.closeError(), true
			}
		case <-deadline:
			return nil, false
		}
	}
}

// Close closes the connection.
func (c *Client) Close() error { return c.Conn.Close() }

// TextReply builds an AskQuestionReply frame answering id with texts,
// one content each: the options ticked, as the inbox answers a question
// that takes several.
func TextReply(id string, texts ...string) *pb.WebsocketMessage {
	contents := make([]*pb.McpResultContent, 0, len(texts))
	for _, text := range texts {
		contents = append(contents, &pb.McpResultContent{Type: 1, Text: &pb.TextContent{Type: "text", Text: text}})
	}
	return &pb.WebsocketMessage{
		Cmd:                 "AskQuestionReply",
		AskQuestionRequest:  &pb.AskQuestionRequest{ID: id},
		AskQuestionResponse: &pb.AskQuestionResponse{ID: id, Contents: contents},
	}
}
