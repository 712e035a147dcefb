package inbox_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestMessages: each kind of note the hub tells a room's clients goes out
// on /ws as the frames seed 002 and the older clients know, numbered as
// the note is.
func TestMessages(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000)
	user := hub.User{ID: "c1", Nickname: "phone", ConnectedAt: at}
	report := hub.Request{Kind: wire.TaskFinish, ID: "t1", ProjectDirectory: "/src", Text: "Done.", Timeout: time.Minute, AgentName: "agent"}
	task := &pb.TaskFinishRequest{ID: "t1", UserToken: "tok", Timestamp: at.UnixMilli(), Request: &pb.McpTaskFinishRequest{
		ProjectDirectory: "/src", Summary: "Done.", Timeout: 60, AgentName: "agent"}}
	reply := &hub.Reply{Meta: map[string]string{"k": "v"}, ClientID: "c2", Nickname: "laptop"}
	for _, tc := range []struct {
		name string
		note *hub.Note
		want []*pb.WebsocketMessage
	}{
		{"a question shown", &hub.Note{Kind: hub.NoteAsked, Seq: 7, Token: "tok", AskedAt: at,
			Request: hub.Request{Kind: wire.AskQuestion, ID: "q1", Text: "Go?", Timeout: time.Hour}},
			[]*pb.WebsocketMessage{{Cmd: wire.CmdAskQuestion, Seq: 7, AskQuestionRequest: &pb.AskQuestionRequest{
				ID: "q1", UserToken: "tok", Timestamp: at.UnixMilli(), Request: &pb.McpAskQuestionRequest{Question: "Go?", Timeout: 3600}}}}},
		{"a task report shown, under both generations' Cmds", &hub.Note{Kind: hub.NoteAsked, Seq: 8, Token: "tok", AskedAt: at, Request: report},
			[]*pb.WebsocketMessage{
				{Cmd: wire.CmdTaskFinish, Seq: 8, TaskFinishRequest: task},
				{Cmd: wire.CmdWorkReport, Seq: 8, TaskFinishRequest: task}}},
		{"a task report answered", &hub.Note{Kind: hub.NoteAnswered, Seq: 9, Token: "tok", AskedAt: at, Request: report, Reply: reply},
			[]*pb.WebsocketMessage{
				{Cmd: wire.CmdTaskFinishReplyNotification, Seq: 9, TaskFinishRequest: task,
					TaskFinishResponse: &pb.TaskFinishResponse{ID: "t1", Meta: reply.Meta},
					StrParam:           "Task completion confirmed by client c2 (laptop)", Nickname: "laptop"},
				{Cmd: wire.CmdWorkReportReplyNotification, Seq: 9, TaskFinishRequest: task,
					TaskFinishResponse: &pb.TaskFinishResponse{ID: "t1", Meta: reply.Meta},
					StrParam:           "Task completion confirmed by client c2 (laptop)", Nickname: "laptop"}}},
		{"a request timed out", &hub.Note{Kind: hub.NoteClosed, Seq: 10, Request: report, Reason: "timeout"},
			[]*pb.WebsocketMessage{{Cmd: wire.CmdRequestCancelled, Seq: 10, RequestCancelledNotification: &pb.RequestCancelledNotification{
				RequestId: "t1", Reason: "timeout", MessageType: wire.CmdTaskFinish}}}},
		{"a request whose kind is forgotten", &hub.Note{Kind: hub.NoteClosed, Request: hub.Request{ID: "old"}, Reason: hub.ReasonNoLongerPending},
			[]*pb.WebsocketMessage{{Cmd: wire.CmdRequestCancelled, RequestCancelledNotification: &pb.RequestCancelledNotification{
				RequestId: "old", Reason: hub.ReasonNoLongerPending}}}},
		{"no agent waits", &hub.Note{Kind: hub.NoteAgent, Seq: 11, Request: report, Gone: true},
			[]*pb.WebsocketMessage{{Cmd: wire.CmdRequestAgentStatus, Seq: 11, RequestAgentStatusNotification: &pb.RequestAgentStatusNotification{
				RequestId: "t1", MessageType: wire.CmdTaskFinish, AgentGone: true}}}},
		{"a device joined", &hub.Note{Kind: hub.NotePresence, User: user, Status: wire.StatusConnected, At: at},
			[]*pb.WebsocketMessage{{Cmd: wire.CmdUserConnectionStatusNotification, UserConnectionStatusNotification: &pb.UserConnectionStatusNotification{
				User: &pb.OnlineUser{ClientId: "c1", Nickname: "phone", ConnectedAt: at.Unix()}, Status: wire.StatusConnected, Timestamp: at.Unix()}}}},
		{"a crowd came", &hub.Note{Kind: hub.NoteCrowd, At: at},
			[]*pb.WebsocketMessage{{Cmd: wire.CmdUserConnectionStatusNotification, UserConnectionStatusNotification: &pb.UserConnectionStatusNotification{
				Status: wire.StatusChanged, Timestamp: at.Unix()}}}},
		{"who is online", &hub.Note{Kind: hub.NoteOnline, Users: []hub.User{user}},
			[]*pb.WebsocketMessage{{Cmd: wire.CmdGetOnlineUsers, GetOnlineUsersResponse: &pb.GetOnlineUsersResponse{
				OnlineUsers: []*pb.OnlineUser{{ClientId: "c1", Nickname: "phone", ConnectedAt: at.Unix()}}, TotalCount: 1}}}},
		{"a chat line", &hub.Note{Kind: hub.NoteLine, Line: &hub.Line{ID: "m1", From: user, To: hub.User{ID: "c2", Nickname: "laptop"}, Content: "hi", SentAt: at}},
			[]*pb.WebsocketMessage{{Cmd: wire.CmdChatMessageNotification, ChatMessageNotification: &pb.ChatMessageNotification{ChatMessage: &pb.ChatMessage{
				MessageId: "m1", SenderClientId: "c1", SenderNickname: "phone", ReceiverClientId: "c2", ReceiverNickname: "laptop", Content: "hi", SentAt: at.Unix()}}}}},
		{"a backspace", &hub.Note{Kind: hub.NoteLine, Line: &hub.Line{Backspace: true, From: user, To: hub.User{ID: "c2"}}},
			[]*pb.WebsocketMessage{{Cmd: wire.CmdSendBackspace, SendBackspaceRequest: &pb.SendBackspaceRequest{ReceiverClientId: "c2"}, StrParam: "c1", Nickname: "phone"}}},
		{"the requests lost", &hub.Note{Kind: hub.NoteLost, Lost: []store.Lost{{ID: "q1", Kind: int(wire.AskQuestion), ProjectDirectory: "/src", CreatedAt: at, Found: at.Add(time.Second)}}},
			[]*pb.WebsocketMessage{{Cmd: wire.CmdRequestsLost, RequestsLost: &pb.RequestsLostNotification{Requests: []*pb.LostRequest{{
				RequestId: "q1", MessageType: wire.CmdAskQuestion, ProjectDirectory: "/src", CreatedAt: at.UnixMilli(), LostAt: at.Add(time.Second).UnixMilli()}}}}}},
		{"the lost requests dismissed", &hub.Note{Kind: hub.NoteLost},
			[]*pb.WebsocketMessage{{Cmd: wire.CmdRequestsLost, RequestsLost: &pb.RequestsLostNotification{}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := inbox.Messages(tc.note)
			if len(got) != len(tc.want) {
				t.Fatalf("%d frames, want %d: %v", len(got), len(tc.want), got)
			}
			for i := range got {
				if !proto.Equal(got[i], tc.want[i]) {
					t.Errorf("frame %d:\n got %v\nwant %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}
