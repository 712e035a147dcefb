package inbox

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// The /ws frames of what the hub tells a room's clients (hub.Note), and
// the older clients' ways with them: a task report goes out under both
// generations' Cmds (bothGenerations), and is listed under one name in
// the pending list (pendingMessage).

// encode is a note's frames, marshalled: a note is encoded once however
// many clients it goes to (hub.Note.Encoded).
func encode(n *hub.Note) [][]byte {
	ms := Messages(n)
	if len(ms) == 2 {
		if a, b, ok := marshalTwins(ms[0], ms[1]); ok {
			return [][]byte{a, b}
		}
	}
	bs := make([][]byte, len(ms))
	for i, m := range ms {
		bs[i] = marshal(m)
	}
	return bs
}

func marshal(m *pb.WebsocketMessage) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		// Only a string that is not UTF-8, which the hub lets in from no
		// door (hub.Answer makes answers valid): sent with it replaced,
		// on a copy, since the note's parts are shared.
		m = proto.CloneOf(m)
		wire.ValidUTF8(m)
		if b, err = proto.Marshal(m); err != nil {
			panic(fmt.Sprintf("marshal %s frame: %v", m.Cmd, err))
		}
	}
	return b
}

// Messages returns the frames n goes out as on /ws, in order, each
// numbered as n is.
func Messages(n *hub.Note) []*pb.WebsocketMessage {
	var ms []*pb.WebsocketMessage
	switch n.Kind {
	case hub.NoteAsked:
		ms = requestFrame(n)
	case hub.NoteAnswered:
		ms = replyNotificationFrame(n)
	case hub.NoteClosed:
		ms = []*pb.WebsocketMessage{cancelledFrame(n)}
	case hub.NoteAgent:
		ms = []*pb.WebsocketMessage{{
			Cmd: wire.CmdRequestAgentStatus,
			RequestAgentStatusNotification: &pb.RequestAgentStatusNotification{
				RequestId:   n.Request.ID,
				MessageType: n.Request.Kind.String(),
				AgentGone:   n.Gone,
			},
		}}
	case hub.NotePresence:
		ms = []*pb.WebsocketMessage{{
			Cmd: wire.CmdUserConnectionStatusNotification,
			UserConnectionStatusNotification: &pb.UserConnectionStatusNotification{
				User: onlineUser(n.User), Status: n.Status, Timestamp: n.At.Unix(),
			},
		}}
	case hub.NoteCrowd:
		ms = []*pb.WebsocketMessage{{
			Cmd: wire.CmdUserConnectionStatusNotification,
			UserConnectionStatusNotification: &pb.UserConnectionStatusNotification{
				Status: wire.StatusChanged, Timestamp: n.At.Unix(),
			},
		}}
	case hub.NoteOnline:
		ms = []*pb.WebsocketMessage{onlineUsersFrame(n.Users)}
	case hub.NoteLine:
		ms = []*pb.WebsocketMessage{lineFrame(n.Line)}
	case hub.NoteLost:
		ms = []*pb.WebsocketMessage{lostFrame(n)}
	default:
		panic(fmt.Sprintf("no /ws frame for a note of kind %d", n.Kind))
	}
	for _, m := range ms {
		m.Seq = n.Seq
	}
	return ms
}

// askRequest rebuilds the wire form of an AskQuestion request.
func askRequest(n *hub.Note) *pb.AskQuestionRequest {
	q := &n.Request
	return &pb.AskQuestionRequest{
		ID:        q.ID,
		UserToken: n.Token,
		Request: &pb.McpAskQuestionRequest{
			ProjectDirectory:   q.ProjectDirectory,
			Question:           q.Text,
			Timeout:            wire.Seconds(q.Timeout),
			AgentName:          q.AgentName,
			ReasoningModelName: q.ReasoningModelName,
			McpClientName:      q.McpClientName,
			Questions:          q.Questions,
		},
		Timestamp: n.AskedAt.UnixMilli(),
	}
}

func taskRequest(n *hub.Note) *pb.TaskFinishRequest {
	q := &n.Request
	return &pb.TaskFinishRequest{
		ID:        q.ID,
		UserToken: n.Token,
		Request: &pb.McpTaskFinishRequest{
			ProjectDirectory:   q.ProjectDirectory,
			Summary:            q.Text,
			Timeout:            wire.Seconds(q.Timeout),
			AgentName:          q.AgentName,
			ReasoningModelName: q.ReasoningModelName,
			McpClientName:      q.McpClientName,
			Questions:          q.Questions,
		},
		Timestamp: n.AskedAt.UnixMilli(),
	}
}

// bothGenerations returns a task-report frame and its twin under the
// current upstream generation's Cmd: clients of either act on the one
// they know and ignore the other.
func bothGenerations(m *pb.WebsocketMessage, current string) []*pb.WebsocketMessage {
	return []*pb.WebsocketMessage{m, {
		Cmd:                current,
		TaskFinishRequest:  m.TaskFinishRequest,
		TaskFinishResponse: m.TaskFinishResponse,
		StrParam:           m.StrParam,
		Nickname:           m.Nickname,
	}}
}

func requestFrame(n *hub.Note) []*pb.WebsocketMessage {
	if n.Request.Kind == wire.AskQuestion {
		return []*pb.WebsocketMessage{{Cmd: wire.CmdAskQuestion, AskQuestionRequest: askRequest(n)}}
	}
	return bothGenerations(&pb.WebsocketMessage{Cmd: wire.CmdTaskFinish, TaskFinishRequest: taskRequest(n)}, wire.CmdWorkReport)
}

func replyNotificationFrame(n *hub.Note) []*pb.WebsocketMessage {
	rep := n.Reply
	who := answeredBy(rep)
	if n.Request.Kind == wire.AskQuestion {
		return []*pb.WebsocketMessage{{
			Cmd:                 wire.CmdAskQuestionReplyNotification,
			AskQuestionRequest:  askRequest(n),
			AskQuestionResponse: askResponse(n.Request.ID, rep),
			StrParam:            "Response received from " + who,
			Nickname:            rep.Nickname,
		}}
	}
	return bothGenerations(&pb.WebsocketMessage{
		Cmd:                wire.CmdTaskFinishReplyNotification,
		TaskFinishRequest:  taskRequest(n),
		TaskFinishResponse: &pb.TaskFinishResponse{ID: n.Request.ID, IsError: rep.IsError, Meta: rep.Meta, Contents: rep.Contents},
		StrParam:           "Task completion confirmed by " + who,
		Nickname:           rep.Nickname,
	}, wire.CmdWorkReportReplyNotification)
}

// answeredBy names who answered as seed 002's reply notifications do,
// "client <id>", with the nickname after it in parentheses for a person
// to read. A reply kept without the ID (none is written so today) is
// named by its nickname alone.
func answeredBy(rep *hub.Reply) string {
	switch {
	case rep.ClientID == "":
		return "client " + rep.Nickname
	case rep.Nickname == "" || rep.Nickname == rep.ClientID:
		return "client " + rep.ClientID
	}
	return "client " + rep.ClientID + " (" + rep.Nickname + ")"
}

func askResponse(id string, rep *hub.Reply) *pb.AskQuestionResponse {
	return &pb.AskQuestionResponse{ID: id, IsError: rep.IsError, Meta: rep.Meta, Contents: rep.Contents}
}

func cancelledFrame(n *hub.Note) *pb.WebsocketMessage {
	kind := ""
	if n.Request.Kind != 0 { // else not known any more
		kind = n.Request.Kind.String()
	}
	return &pb.WebsocketMessage{
		Cmd: wire.CmdRequestCancelled,
		RequestCancelledNotification: &pb.RequestCancelledNotification{
			RequestId:   n.Request.ID,
			Reason:      n.Reason,
			MessageType: kind,
		},
	}
}

// pendingMessage lists n, a pending request, for GetPendingMessages. A
// task report is listed once, under the name of the generation that
// asked it: upstream's Flutter app counts every entry and converts only
// the name it knows, and the app of the asking agent's generation is the
// one that should list it; unless the client said which name it knows
// (reportName, from the reply Cmd it answered a report with). A client
// that shows no options (optionsInText) reads them in the text.
func pendingMessage(n *hub.Note, reportName string, optionsInText bool) *pb.PendingMessage {
	q := &n.Request
	m := &pb.PendingMessage{
		MessageType: q.Kind.String(),
		CreatedAt:   n.AskedAt.UnixMilli(),
		Timeout:     wire.Seconds(q.Timeout),
		AgentGone:   n.Gone,
	}
	extra := ""
	if optionsInText {
		extra = wire.OptionsText(n.Request.Questions)
	}
	if q.Kind == wire.AskQuestion {
		m.AskQuestionRequest = askRequest(n)
		m.AskQuestionRequest.Request.Question += extra
		return m
	}
	switch {
	case reportName != "":
		m.MessageType = reportName
	case q.TaskFinishEra:
		m.MessageType = wire.CmdTaskFinish
	default:
		m.MessageType = wire.CmdWorkReport
	}
	m.TaskFinishRequest = taskRequest(n)
	m.TaskFinishRequest.Request.Summary += extra
	return m
}

func onlineUser(u hub.User) *pb.OnlineUser {
	return &pb.OnlineUser{ClientId: u.ID, Nickname: u.Nickname, ConnectedAt: u.ConnectedAt.Unix()}
}

func onlineUsersFrame(us []hub.User) *pb.WebsocketMessage {
	out := make([]*pb.OnlineUser, len(us))
	for i, u := range us {
		out[i] = onlineUser(u)
	}
	return &pb.WebsocketMessage{
		Cmd:                    wire.CmdGetOnlineUsers,
		GetOnlineUsersResponse: &pb.GetOnlineUsersResponse{OnlineUsers: out, TotalCount: wire.Count(len(out))},
	}
}

// lineFrame is a chat line's notification, or a remote-input backspace
// naming its sender.
func lineFrame(l *hub.Line) *pb.WebsocketMessage {
	if l.Backspace {
		return &pb.WebsocketMessage{
			Cmd:                  wire.CmdSendBackspace,
			SendBackspaceRequest: &pb.SendBackspaceRequest{ReceiverClientId: l.To.ID},
			StrParam:             l.From.ID,
			Nickname:             l.From.Nickname,
		}
	}
	return &pb.WebsocketMessage{
		Cmd: wire.CmdChatMessageNotification,
		ChatMessageNotification: &pb.ChatMessageNotification{ChatMessage: &pb.ChatMessage{
			MessageId:        l.ID,
			SenderClientId:   l.From.ID,
			SenderNickname:   l.From.Nickname,
			ReceiverClientId: l.To.ID,
			ReceiverNickname: l.To.Nickname,
			Content:          l.Content,
			SentAt:           l.SentAt.Unix(),
		}},
	}
}

func lostFrame(n *hub.Note) *pb.WebsocketMessage {
	ls := &pb.RequestsLostNotification{Requests: make([]*pb.LostRequest, 0, len(n.Lost))}
	for _, l := range n.Lost {
		ls.Requests = append(ls.Requests, &pb.LostRequest{
			RequestId: l.ID, MessageType: wire.Kind(l.Kind).String(), ProjectDirectory: l.ProjectDirectory,
			CreatedAt: l.CreatedAt.UnixMilli(), LostAt: l.Found.UnixMilli(),
		})
	}
	return &pb.WebsocketMessage{Cmd: wire.CmdRequestsLost, RequestsLost: ls}
}

// historyItem lists p, a settled request of token, for GetHistory.
func historyItem(token string, p hub.Past) *pb.HistoryItem {
	n := &hub.Note{Kind: hub.NoteAsked, Token: token, Request: p.Request, AskedAt: p.AskedAt}
	it := &pb.HistoryItem{MessageType: p.Request.Kind.String(), CreatedAt: p.AskedAt.UnixMilli(), Status: p.Status, ClosedAt: p.ClosedAt.UnixMilli()}
	if p.Request.Kind == wire.AskQuestion {
		it.AskQuestionRequest = askRequest(n)
	} else {
		it.TaskFinishRequest = taskRequest(n)
	}
	if p.Reply != nil {
		it.Response = askResponse(p.Request.ID, p.Reply)
		it.AnsweredBy, it.AnsweredById = p.Reply.Nickname, p.Reply.ClientID
	} else {
		it.Reason = p.Reason
	}
	return it
}
