package inbox

import (
	"errors"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// conn is one /ws connection. The handler goroutine reads; one writer
// goroutine, owned and awaited by run, writes.
type conn struct {
	h  *Handler
	ws *websocket.Conn

	id          string
	connectedAt time.Time
	// set once at login, read-only afterwards
	token    string
	nickname string

	send chan []byte
	done chan struct{}

	closeOnce sync.Once
	closeMsg  []byte // close frame the writer sends on its way out
}

func newConn(h *Handler, ws *websocket.Conn) *conn {
	return &conn{
		h:           h,
		ws:          ws,
		id:          hub.NewID()[:16],
		connectedAt: time.Now(),
		send:        make(chan []byte, h.o.SendQueue),
		done:        make(chan struct{}),
	}
}

func (c *conn) ID() string             { return c.id }
func (c *conn) Nickname() string       { return c.nickname }
func (c *conn) ConnectedAt() time.Time { return c.connectedAt }

// Send queues frame without blocking. A client whose queue is full is too
// slow to keep: it is disconnected so it cannot hold up anyone else.
func (c *conn) Send(frame []byte) bool {
	select {
	case c.send <- frame:
		return true
	case <-c.done:
		return false
	default:
		c.h.log.Warn("client too slow, disconnecting", "client", c.id)
		c.shutdown(websocket.ClosePolicyViolation, "send queue full")
		return false
	}
}

// shutdown ends the connection; the writer sends the close frame. Safe to
// call from any goroutine, any number of times.
func (c *conn) shutdown(code int, text string) {
	c.closeOnce.Do(func() {
		c.closeMsg = websocket.FormatCloseMessage(code, text)
		close(c.done)
	})
}

func (c *conn) run() {
	var wg sync.WaitGroup
	wg.Go(c.writeLoop)
	c.readLoop()
	c.shutdown(websocket.CloseNormalClosure, "")
	wg.Wait()
	c.ws.Close()
	if c.token != "" {
		c.h.o.Hub.Leave(c.token, c)
		c.h.log.Info("client left", "client", c.id)
	}
}

func (c *conn) writeLoop() {
	o := &c.h.o
	ping := time.NewTicker(o.PingInterval)
	defer ping.Stop()
	for {
		select {
		case frame := <-c.send:
			_ = c.ws.SetWriteDeadline(time.Now().Add(o.WriteWait))
			if err := c.ws.WriteMessage(websocket.BinaryMessage, frame); err != nil {
				c.shutdown(websocket.CloseAbnormalClosure, "")
				c.ws.Close() // unblock the reader
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(o.WriteWait)); err != nil {
				c.shutdown(websocket.CloseAbnormalClosure, "")
				c.ws.Close()
				return
			}
		case <-c.done:
			_ = c.ws.WriteControl(websocket.CloseMessage, c.closeMsg, time.Now().Add(o.WriteWait))
			// The reader may be blocked; closing the socket ends it. A
			// short grace lets the peer see the close frame first.
			time.AfterFunc(100*time.Millisecond, func() { c.ws.Close() })
			return
		}
	}
}

func (c *conn) readLoop() {
	o := &c.h.o
	c.ws.SetReadLimit(loginFrameLimit)
	_ = c.ws.SetReadDeadline(time.Now().Add(o.LoginTimeout))
	c.ws.SetPongHandler(func(string) error {
		if c.token != "" {
			return c.ws.SetReadDeadline(time.Now().Add(o.PongWait))
		}
		return nil
	})
	for {
		typ, data, err := c.ws.ReadMessage()
		if err != nil {
			if c.token == "" && isTimeout(err) {
				c.shutdown(websocket.ClosePolicyViolation, "login timeout")
			}
			return
		}
		if c.token != "" {
			_ = c.ws.SetReadDeadline(time.Now().Add(o.PongWait))
		}
		if typ != websocket.BinaryMessage {
			c.sendError("malformed_frame", "frames must be binary protobuf WebsocketMessage", "", "")
			continue
		}
		var m pb.WebsocketMessage
		if err := proto.Unmarshal(data, &m); err != nil {
			c.h.log.Debug("malformed frame", "client", c.id, "err", err)
			c.sendError("malformed_frame", "cannot decode WebsocketMessage: "+err.Error(), "", "")
			continue
		}
		if c.token == "" {
			if !c.login(&m) {
				return
			}
			continue
		}
		c.dispatch(&m)
	}
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// login handles frames before the client is logged in. It reports false
// when the connection must end.
func (c *conn) login(m *pb.WebsocketMessage) bool {
	o := &c.h.o
	if m.Cmd != hub.CmdUserLogin {
		c.sendError("not_logged_in", "send UserLogin with the token first", "", m.Cmd)
		return true
	}
	if !o.Tokens.Valid(m.StrParam) {
		c.h.log.Info("login refused: wrong token", "client", c.id)
		c.reply(&pb.WebsocketMessage{
			Cmd:               hub.CmdUserLogin,
			UserLoginResponse: &pb.UserLoginResponse{ClientId: c.id, ErrorMessage: "invalid token"},
		})
		c.shutdown(websocket.ClosePolicyViolation, "invalid token")
		return false
	}
	c.nickname = cleanNickname(m.Nickname, c.id)
	c.token = m.StrParam
	c.ws.SetReadLimit(o.MaxFrame)
	_ = c.ws.SetReadDeadline(time.Now().Add(o.PongWait))
	c.reply(&pb.WebsocketMessage{
		Cmd:               hub.CmdUserLogin,
		UserLoginResponse: &pb.UserLoginResponse{ClientId: c.id, Success: true},
		Nickname:          c.nickname,
	})
	o.Hub.Join(c.token, c)
	c.h.log.Info("client logged in", "client", c.id, "nickname", c.nickname)
	return true
}

const maxNickname = 64

func cleanNickname(n, id string) string {
	n = strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, n))
	if utf8.RuneCountInString(n) > maxNickname {
		n = string([]rune(n)[:maxNickname])
	}
	if n == "" {
		n = "User_" + id[:6]
	}
	return n
}

func (c *conn) dispatch(m *pb.WebsocketMessage) {
	hb := c.h.o.Hub
	switch m.Cmd {
	case hub.CmdAskQuestionReply:
		id := m.GetAskQuestionRequest().GetID()
		if id == "" {
			id = m.GetAskQuestionResponse().GetID()
		}
		r := m.GetAskQuestionResponse()
		c.answer(hub.AskQuestion, m.Cmd, id, r.GetIsError(), r.GetMeta(), r.GetContents())
	case hub.CmdTaskFinishReply:
		id := m.GetTaskFinishRequest().GetID()
		if id == "" {
			id = m.GetTaskFinishResponse().GetID()
		}
		r := m.GetTaskFinishResponse()
		c.answer(hub.TaskFinish, m.Cmd, id, r.GetIsError(), r.GetMeta(), r.GetContents())
	case hub.CmdCheckMessageValidity:
		c.reply(&pb.WebsocketMessage{
			Cmd: m.Cmd,
			CheckMessageValidityResponse: &pb.CheckMessageValidityResponse{
				Validity: hb.Validity(c.token, m.GetCheckMessageValidityRequest().GetRequestIds()),
			},
		})
	case hub.CmdGetPendingMessages:
		ps := hb.PendingMessages(c.token)
		c.reply(&pb.WebsocketMessage{
			Cmd:                        m.Cmd,
			GetPendingMessagesResponse: &pb.GetPendingMessagesResponse{PendingMessages: ps, TotalCount: int32(len(ps))},
		})
	case hub.CmdGetOnlineUsers:
		us := hb.OnlineUsers(c.token)
		c.reply(&pb.WebsocketMessage{
			Cmd:                    m.Cmd,
			GetOnlineUsersResponse: &pb.GetOnlineUsersResponse{OnlineUsers: us, TotalCount: int32(len(us))},
		})
	case hub.CmdSendChatMessage:
		req := m.GetSendChatMessageRequest()
		if req.GetReceiverClientId() == "" || strings.TrimSpace(req.GetContent()) == "" {
			c.sendError("invalid_request", "SendChatMessage needs receiver_client_id and content", "", m.Cmd)
			return
		}
		if _, err := hb.Chat(c.token, c, req.GetReceiverClientId(), req.GetContent()); err != nil {
			c.sendError("receiver_offline", err.Error(), "", m.Cmd)
		}
	case hub.CmdUserLogin:
		c.sendError("invalid_request", "already logged in", "", m.Cmd)
	default:
		c.sendError("unknown_cmd", "unknown Cmd "+quote(m.Cmd), "", m.Cmd)
	}
}

func (c *conn) answer(kind hub.Kind, cmd, id string, isErr bool, meta map[string]string, contents []*pb.McpResultContent) {
	if id == "" {
		c.sendError("invalid_request", cmd+" needs the request ID", "", cmd)
		return
	}
	err := c.h.o.Hub.Answer(c.token, kind, id, hub.Reply{
		IsError: isErr, Meta: meta, Contents: contents, ClientID: c.id, Nickname: c.nickname,
	})
	if err != nil {
		c.sendError("not_pending", err.Error(), id, cmd)
		return
	}
	c.h.log.Info("request answered", "kind", kind, "id", id, "client", c.id)
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return `"` + strings.ToValidUTF8(s, "�") + `"`
}

func (c *conn) reply(m *pb.WebsocketMessage) {
	b, err := proto.Marshal(m)
	if err != nil {
		c.h.log.Error("marshal reply", "cmd", m.Cmd, "err", err)
		return
	}
	c.Send(b)
}

func (c *conn) sendError(code, msg, requestID, cmd string) {
	c.reply(&pb.WebsocketMessage{
		Cmd:   hub.CmdError,
		Error: &pb.ErrorNotification{Code: code, Message: msg, RequestId: requestID, Cmd: strings.ToValidUTF8(cmd, "")},
	})
}
