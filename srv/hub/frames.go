package hub

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

func marshal(m *pb.WebsocketMessage) []byte {
	b, err := proto.Marshal(m)
	if err != nil { // only on invalid UTF-8 in a string field, which we never build
		panic(fmt.Sprintf("marshal %s frame: %v", m.Cmd, err))
	}
	return b
}

// AskQuestionRequest rebuilds the wire form of an AskQuestion request.
func askRequest(p *pending) *pb.AskQuestionRequest {
	return &pb.AskQuestionRequest{
		ID:        p.req.ID,
		UserToken: p.token,
		Request: &pb.McpAskQuestionRequest{
			ProjectDirectory:   p.req.ProjectDirectory,
			Question:           p.req.Text,
			Timeout:            wire.Seconds(p.req.Timeout),
			AgentName:          p.req.AgentName,
			ReasoningModelName: p.req.ReasoningModelName,
			McpClientName:      p.req.McpClientName,
			Questions:          p.req.Questions,
		},
		Timestamp: p.createdAt.UnixMilli(),
	}
}

func taskRequest(p *pending) *pb.TaskFinishRequest {
	return &pb.TaskFinishRequest{
		ID:        p.req.ID,
		UserToken: p.token,
		Request: &pb.McpTaskFinishRequest{
			ProjectDirectory:   p.req.ProjectDirectory,
			Summary:            p.req.Text,
			Timeout:            wire.Seconds(p.req.Timeout),
			AgentName:          p.req.AgentName,
			ReasoningModelName: p.req.ReasoningModelName,
			McpClientName:      p.req.McpClientName,
			Questions:          p.req.Questions,
		},
		Timestamp: p.createdAt.UnixMilli(),
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

func requestFrame(p *pending) []*pb.WebsocketMessage {
	if p.req.Kind == wire.AskQuestion {
		return []*pb.WebsocketMessage{{Cmd: wire.CmdAskQuestion, AskQuestionRequest: askRequest(p)}}
	}
	return bothGenerations(&pb.WebsocketMessage{Cmd: wire.CmdTaskFinish, TaskFinishRequest: taskRequest(p)}, wire.CmdWorkReport)
}

func replyNotificationFrame(p *pending, rep *Reply) []*pb.WebsocketMessage {
	who := answeredBy(rep)
	if p.req.Kind == wire.AskQuestion {
		return []*pb.WebsocketMessage{{
			Cmd:                 wire.CmdAskQuestionReplyNotification,
			AskQuestionRequest:  askRequest(p),
			AskQuestionResponse: AskResponse(p.req.ID, rep),
			StrParam:            "Response received from " + who,
			Nickname:            rep.Nickname,
		}}
	}
	return bothGenerations(&pb.WebsocketMessage{
		Cmd:                wire.CmdTaskFinishReplyNotification,
		TaskFinishRequest:  taskRequest(p),
		TaskFinishResponse: TaskResponse(p.req.ID, rep),
		StrParam:           "Task completion confirmed by " + who,
		Nickname:           rep.Nickname,
	}, wire.CmdWorkReportReplyNotification)
}

// answeredBy names who answered as seed 002's reply notifications do,
// "client <id>", with the nickname after it in parentheses for a person
// to read. A reply kept without the ID (none is written so today) is
// named by its nickname alone.
func answeredBy(rep *Reply) string {
	switch {
	case rep.ClientID == "":
		return "client " + rep.Nickname
	case rep.Nickname == "" || rep.Nickname == rep.ClientID:
		return "client " + rep.ClientID
	}
	return "client " + rep.ClientID + " (" + rep.Nickname + ")"
}

// AskResponse is rep in its AskQuestion wire form.
func AskResponse(id string, rep *Reply) *pb.AskQuestionResponse {
	return &pb.AskQuestionResponse{ID: id, IsError: rep.IsError, Meta: rep.Meta, Contents: rep.Contents}
}

// TaskResponse is rep in its TaskFinish wire form.
func TaskResponse(id string, rep *Reply) *pb.TaskFinishResponse {
	return &pb.TaskFinishResponse{ID: id, IsError: rep.IsError, Meta: rep.Meta, Contents: rep.Contents}
}

func cancelledFrame(p *pending, reason string) []*pb.WebsocketMessage {
	return []*pb.WebsocketMessage{{
		Cmd: wire.CmdRequestCancelled,
		RequestCancelledNotification: &pb.RequestCancelledNotification{
			RequestId:   p.req.ID,
			Reason:      reason,
			MessageType: p.req.Kind.String(),
		},
	}}
}

func agentStatusFrame(p *pending, gone bool) *pb.WebsocketMessage {
	return &pb.WebsocketMessage{
		Cmd: wire.CmdRequestAgentStatus,
		RequestAgentStatusNotification: &pb.RequestAgentStatusNotification{
			RequestId:   p.req.ID,
			MessageType: p.req.Kind.String(),
			AgentGone:   gone,
		},
	}
}

// pendingMessages lists p for GetPendingMessages: a task report under both
// generations' names.
func pendingMessages(p *pending) []*pb.PendingMessage {
	m := &pb.PendingMessage{
		MessageType: p.req.Kind.String(),
		CreatedAt:   p.createdAt.UnixMilli(),
		Timeout:     wire.Seconds(p.req.Timeout),
		AgentGone:   p.gone.Load(),
	}
	if p.req.Kind == wire.AskQuestion {
		m.AskQuestionRequest = askRequest(p)
		return []*pb.PendingMessage{m}
	}
	// Once, under the name of the generation that asked it: upstream's
	// Flutter app counts every entry and converts only the name it knows,
	// and the app of the asking agent's generation is the one that should
	// list it. The /ws endpoint renames it for a client whose generation
	// it knows (from the reply Cmd it answered a report with).
	m.MessageType = wire.CmdWorkReport
	if p.req.TaskFinishEra {
		m.MessageType = wire.CmdTaskFinish
	}
	m.TaskFinishRequest = taskRequest(p)
	return []*pb.PendingMessage{m}
}

func onlineUser(c Client) *pb.OnlineUser {
	return &pb.OnlineUser{ClientId: c.ID(), Nickname: c.Nickname(), ConnectedAt: c.ConnectedAt().Unix()}
}

func statusFrame(c Client, status string, now time.Time) *pb.WebsocketMessage {
	return &pb.WebsocketMessage{
		Cmd: wire.CmdUserConnectionStatusNotification,
		UserConnectionStatusNotification: &pb.UserConnectionStatusNotification{
			User:      onlineUser(c),
			Status:    status,
			Timestamp: now.Unix(),
		},
	}
}
