package inbox

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/protocount"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/wsconn"
)

// conn is one /ws connection: the endpoint's set reads it (message), the
// embedded wsconn.Conn writes.
type conn struct {
	*wsconn.Conn
	h *Handler

	id          string
	connectedAt time.Time
	remote      string
	// set once at login, read-only afterwards
	token string
	// set at login and by a rename (UserLogin again); the hub reads it
	// from other goroutines
	nickname atomic.Pointer[string]
	// After a login that did not resume, the first request decides: a
	// client whose first request is not GetPendingMessages (upstream's web
	// UI) never asks, so the requests pending since before its login (up
	// to event pushUpTo) are pushed to it then. Read and written by the
	// frame handler only.
	pushArmed bool
	pushUpTo  uint64
	// pushed: the client was found not to ask (the push ran); given is
	// what the push sent it, for Hub.Kept when its connection drops.
	pushed bool
	given  []string
	// optionsInText: the client did not say at login that it shows a
	// request's options (upstream's web UI and Flutter app), so it is
	// given them in the request's text (options.go). Set before the
	// client joins; read by Send, on the hub's goroutines.
	optionsInText bool
	// reportName: the name this client knows task reports by, from the
	// reply Cmd it last answered one with (TaskFinishReply: upstream's
	// clients before the WorkReport rename; WorkReportReply: after it);
	// "" until it answers one. Frame handler only.
	reportName string
}

func (c *conn) ID() string { return c.id }
func (c *conn) Nickname() string {
	if n := c.nickname.Load(); n != nil {
		return *n
	}
	return ""
}
func (c *conn) ConnectedAt() time.Time { return c.connectedAt }

// Send queues n's frames (hub.Client).
func (c *conn) Send(n *hub.Note) bool {
	bs := n.Encoded(encode)
	if c.optionsInText {
		if own, ok := encodeOptionsInText(n); ok {
			bs = own // encoded for it alone: such clients are few
		}
	}
	send := c.Conn.Send
	if n.Kind == hub.NoteLine {
		// Another device's chat, sent at its will: it may take half
		// the queue, never the room a question needs, nor get this
		// device dropped as too slow.
		send = c.Offer
	}
	for _, b := range bs {
		if !send(b) {
			return false
		}
	}
	return true
}

// ended runs once the connection is over.
func (c *conn) ended() {
	if c.token != "" {
		if c.pushed && !c.PeerClosed() {
			// Not a reload or a closed tab (those close the socket): the
			// page will reconnect with its cards.
			c.h.kept.keep(c.token, c.Nickname(), c.h.o.Hub.Shown(c.token, c.pushUpTo, c.given))
		}
		c.h.o.Hub.Leave(c.token, c)
		c.h.log.Info("client left", "client", c.id)
	}
}

// timedOut runs when the client missed its read deadline.
func (c *conn) timedOut() {
	if c.token == "" {
		c.Shutdown(wsconn.ClosePolicyViolation, "login timeout")
	}
}

// message handles one frame from the client; false ends the connection.
func (c *conn) message(text bool, data []byte) bool {
	if text {
		c.sendError("malformed_frame", "frames must be binary protobuf WebsocketMessage", "", "")
		return true
	}
	var m pb.WebsocketMessage
	if err := protocount.Check(data, m.ProtoReflect().Descriptor(), protocount.Max); err != nil {
		c.h.log.Warn("frame refused before decoding", "client", c.id, "bytes", len(data), "err", err)
		c.sendError("malformed_frame", "cannot decode WebsocketMessage: "+err.Error(), "", "")
		return true
	}
	// What is checked is what is forwarded: fields this server does not
	// know go no further than here (an answer's contents go on to every
	// device and the agent).
	if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, &m); err != nil {
		c.h.log.Debug("malformed frame", "client", c.id, "err", err)
		c.sendError("malformed_frame", "cannot decode WebsocketMessage: "+err.Error(), "", "")
		return true
	}
	if c.token == "" {
		return c.login(&m)
	}
	c.dispatch(&m)
	return true
}

// login handles frames before the client is logged in. It reports false
// when the connection must end.
func (c *conn) login(m *pb.WebsocketMessage) bool {
	o := &c.h.o
	c.SetState(wsconn.Authenticating)
	if m.Cmd != wire.CmdUserLogin {
		c.sendError("not_logged_in", "send UserLogin with the token first", "", m.Cmd)
		return true
	}
	refuse := func(msg string) bool {
		c.reply(&pb.WebsocketMessage{
			Cmd:               wire.CmdUserLogin,
			UserLoginResponse: &pb.UserLoginResponse{ClientId: c.id, ErrorMessage: msg},
		})
		c.Shutdown(wsconn.ClosePolicyViolation, msg)
		return false
	}
	if !o.Tokens.Valid(m.StrParam) {
		o.Limiter.Fail(c.Done(), c.remote) // past the budget, the answer waits
		c.h.log.Info("login refused: wrong token", "client", c.id, "remote", auth.Key(c.remote))
		return refuse("invalid token")
	}
	c.Authenticated()
	nick := cleanNickname(m.Nickname, c.id)
	c.nickname.Store(&nick)
	c.optionsInText = !m.GetShowsOptions()
	resumedLogin := false
	welcome := func(resumed bool) {
		resumedLogin = resumed
		c.reply(&pb.WebsocketMessage{
			Cmd:               wire.CmdUserLogin,
			UserLoginResponse: &pb.UserLoginResponse{ClientId: c.id, Success: true, Epoch: o.Hub.Epoch(), Resumed: resumed},
			Nickname:          nick,
		})
	}
	// The cap is checked as the client joins, in one step: a burst of
	// logins cannot all pass the check before any of them has joined.
	pushUpTo, err := o.Hub.JoinAtMost(m.StrParam, o.MaxPerToken, c, welcome, hub.Resume{Epoch: m.GetEpoch(), From: m.GetResumeFrom()})
	if err != nil {
		c.h.log.Warn("login refused: connection cap reached", "client", c.id, "cap", o.MaxPerToken)
		return refuse(err.Error())
	}
	c.token = m.StrParam
	c.SetState(wsconn.Active)
	c.SetReadLimit(o.MaxFrame)
	c.KeepAlive()
	c.pushUpTo = pushUpTo
	c.pushArmed = !resumedLogin
	c.h.log.Info("client logged in", "client", c.id, "nickname", nick)
	if n := o.Hub.Lost(c.token); n != nil {
		c.Send(n)
	}
	return true
}

const maxNickname = 64

// maxDismiss bounds the IDs a RequestsLost frame dismisses at once: more
// than a frame ever shows (hub.maxLostShown).
const maxDismiss = 1000

// cleanNickname makes n a name to show on one line (wire.OneLine), of
// at most maxNickname characters, or one made of the client's id.
func cleanNickname(n, id string) string {
	n = wire.OneLine(n)
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
	if c.pushArmed {
		c.pushArmed = false
		if m.Cmd != wire.CmdGetPendingMessages {
			// Half the send queue, so presence and replies still fit.
			var left int
			shows := c.h.kept.take(c.token, c.Nickname())
			c.given, left = hb.CatchUp(c.token, c, c.pushUpTo, shows, max(1, c.h.o.SendQueue/2), frames)
			c.pushed = true
			if left > 0 {
				c.h.log.Warn("more than a push fits: the oldest pending requests, or outcomes of requests its cards show, were not pushed", "client", c.id, "left", left)
			}
		}
	}
	switch m.Cmd {
	case wire.CmdAskQuestionReply:
		id := cmp.Or(m.GetAskQuestionRequest().GetID(), m.GetAskQuestionResponse().GetID())
		r := m.GetAskQuestionResponse()
		c.answer(wire.AskQuestion, m.Cmd, id, r.GetIsError(), r.GetMeta(), r.GetContents())
	case wire.CmdTaskFinishReply, wire.CmdWorkReportReply:
		c.reportName = wire.CmdWorkReport
		if m.Cmd == wire.CmdTaskFinishReply {
			c.reportName = wire.CmdTaskFinish
		}
		id := cmp.Or(m.GetTaskFinishRequest().GetID(), m.GetTaskFinishResponse().GetID())
		r := m.GetTaskFinishResponse()
		c.answer(wire.TaskFinish, m.Cmd, id, r.GetIsError(), r.GetMeta(), r.GetContents())
	case wire.CmdCheckMessageValidity:
		c.reply(&pb.WebsocketMessage{
			Cmd: m.Cmd,
			CheckMessageValidityResponse: &pb.CheckMessageValidityResponse{
				Validity: hb.Validity(c.token, m.GetCheckMessageValidityRequest().GetRequestIds()),
			},
		})
	case wire.CmdGetPendingMessages:
		ns, seq := hb.PendingMessages(c.token)
		ps := make([]*pb.PendingMessage, len(ns))
		for i, n := range ns {
			ps[i] = pendingMessage(n, c.reportName, c.optionsInText)
		}
		c.reply(&pb.WebsocketMessage{
			Cmd:                        m.Cmd,
			GetPendingMessagesResponse: &pb.GetPendingMessagesResponse{PendingMessages: ps, TotalCount: wire.Count(len(ps))},
			Seq:                        seq,
		})
	case wire.CmdGetOnlineUsers:
		c.reply(onlineUsersFrame(hb.OnlineUsers(c.token)))
	case wire.CmdSendChatMessage:
		req := m.GetSendChatMessageRequest()
		if req.GetReceiverClientId() == "" || strings.TrimSpace(req.GetContent()) == "" {
			c.sendError("invalid_request", "SendChatMessage needs receiver_client_id and content", "", m.Cmd)
			return
		}
		if len(req.GetContent()) > maxChatBytes {
			c.sendError("invalid_request", fmt.Sprintf("a chat message is at most %d bytes", maxChatBytes), "", m.Cmd)
			return
		}
		if _, err := hb.Chat(c.token, c, req.GetReceiverClientId(), req.GetContent()); err != nil {
			c.sendError(chatErrorCode(err), err.Error(), "", m.Cmd)
		}
	case wire.CmdSendBackspace:
		to := m.GetSendBackspaceRequest().GetReceiverClientId()
		if to == "" {
			c.sendError("invalid_request", "SendBackspace needs receiver_client_id", "", m.Cmd)
			return
		}
		if err := hb.Backspace(c.token, c, to); err != nil {
			c.sendError(chatErrorCode(err), err.Error(), "", m.Cmd)
		}
	case wire.CmdGetHistory:
		req := m.GetGetHistoryRequest()
		before := time.Now()
		if req.GetBefore() > 0 {
			before = time.UnixMilli(req.GetBefore())
		}
		limit := int(req.GetLimit())
		opt.Default(&limit, 30)
		past, more, err := hb.History(c.token, before, min(limit, 200))
		if err != nil {
			c.h.log.Error("history", "err", err)
			c.sendError("internal", "history unavailable", "", m.Cmd)
			return
		}
		items := make([]*pb.HistoryItem, len(past))
		for i, p := range past {
			items[i] = historyItem(c.token, p)
		}
		c.reply(&pb.WebsocketMessage{Cmd: m.Cmd, GetHistoryResponse: &pb.GetHistoryResponse{Items: items, More: more}})
	case wire.CmdClearHistory:
		n, err := hb.ClearHistory(c.token)
		if err != nil {
			c.h.log.Error("clear history", "err", err)
			c.sendError("internal", "history not cleared", "", m.Cmd)
			return
		}
		c.reply(&pb.WebsocketMessage{Cmd: m.Cmd, StrParam: strconv.Itoa(n)})
	case wire.CmdRequestsLost:
		ls := m.GetRequestsLost().GetRequests()
		ids := make([]string, 0, min(len(ls), maxDismiss))
		for _, l := range ls[:min(len(ls), maxDismiss)] {
			ids = append(ids, l.GetRequestId())
		}
		if err := hb.DismissLost(c.token, ids); err != nil {
			c.h.log.Error("dismiss lost requests", "err", err)
			c.sendError("internal", "the notice could not be dismissed", "", m.Cmd)
		}
	case wire.CmdUserLogin:
		c.rename(m)
	default:
		c.sendError("unknown_cmd", "unknown Cmd "+quote(m.Cmd), "", m.Cmd)
	}
}

// rename handles UserLogin on a logged-in connection, which is how existing
// agentassistant clients change their nickname: the same answer as a login,
// and the others are told the device is "connected" under its new name.
// The token must be the one it logged in with: a connection never changes
// rooms.
func (c *conn) rename(m *pb.WebsocketMessage) {
	if subtle.ConstantTimeCompare([]byte(m.StrParam), []byte(c.token)) != 1 {
		c.sendError("invalid_request", "already logged in with another token; open a new connection to use this one", "", m.Cmd)
		return
	}
	nick := cleanNickname(m.Nickname, c.id)
	c.nickname.Store(&nick)
	hb := c.h.o.Hub
	c.reply(&pb.WebsocketMessage{
		Cmd:               wire.CmdUserLogin,
		UserLoginResponse: &pb.UserLoginResponse{ClientId: c.id, Success: true, Epoch: hb.Epoch(), Resumed: true},
		Nickname:          nick,
	})
	hb.Rename(c.token, c)
	// Debug: a client may rename as often as it sends frames.
	c.h.log.Debug("client renamed", "client", c.id, "nickname", nick)
}

func (c *conn) answer(kind wire.Kind, cmd, id string, isErr bool, meta map[string]string, contents []*pb.McpResultContent) {
	if id == "" {
		c.sendError("invalid_request", cmd+" needs the request ID", "", cmd)
		return
	}
	// A frame has no context of its own; the hub bounds its wait to hear
	// a request asked elsewhere.
	err := c.h.o.Hub.Answer(context.Background(), c.token, kind, id, hub.Reply{
		IsError: isErr, Meta: meta, Contents: contents, ClientID: c.id, Nickname: c.Nickname(), Door: "ws",
		// A client that shows no options (options.go) knows no Error
		// frame either: it marks its card answered whatever follows.
		AsWritten: c.optionsInText,
	})
	if errors.Is(err, hub.ErrNotSaved) {
		c.sendError("not_saved", err.Error(), id, cmd) // still pending: the person may try again
		return
	}
	if errors.Is(err, hub.ErrNotAnOption) {
		c.sendError("invalid_request", err.Error(), id, cmd) // still pending: the person may choose an option
		return
	}
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
	c.Conn.Send(b)
}

// maxChatBytes bounds a chat line: for a person to read, or a PC to type
// (agentassistant-input types 20,000 characters at most), never the
// receiver's whole queue.
const maxChatBytes = 64 << 10

// chatErrorCode is the Error code of a chat line or backspace not
// delivered for err.
func chatErrorCode(err error) string {
	if errors.Is(err, hub.ErrReceiverBusy) {
		return "receiver_busy"
	}
	return "receiver_offline"
}

func (c *conn) sendError(code, msg, requestID, cmd string) {
	c.reply(&pb.WebsocketMessage{
		Cmd:   wire.CmdError,
		Error: &pb.ErrorNotification{Code: code, Message: msg, RequestId: requestID, Cmd: strings.ToValidUTF8(cmd, "")},
	})
}

// frames is what n costs a client's send queue.
func frames(n *hub.Note) int { return len(n.Encoded(encode)) }
