package srv_test

// Frames as the existing agentassistant clients (its web UI and Flutter app,
// TaskFinish and WorkReport generations) send and read them.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

// nextStatus returns the next presence notification about client id.
func nextStatus(t *testing.T, c *wstest.Client, id string) *pb.UserConnectionStatusNotification {
	t.Helper()
	for {
		m, err := c.Next(5 * time.Second)
		if err != nil {
			t.Fatalf("waiting for the presence of %s: %v", id, err)
		}
		if n := m.GetUserConnectionStatusNotification(); n != nil && n.GetUser().GetClientId() == id {
			return n
		}
	}
}

// Upstream clients add a device to their online list on "connected" and
// drop it on "disconnected"; they ignore every other status.
func TestUpstreamPresenceStatus(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	a := login(t, url, tokA, "laptop")
	b := login(t, url, tokA, "phone")
	if n := nextStatus(t, a, b.ID); n.GetStatus() != "connected" || n.GetUser().GetNickname() != "phone" {
		t.Errorf("join: %v, want status \"connected\"", n)
	}
	b.Close()
	if n := nextStatus(t, a, b.ID); n.GetStatus() != "disconnected" {
		t.Errorf("leave: %v, want status \"disconnected\"", n)
	}
}

// Upstream sends connected_at, sent_at and the presence timestamp in Unix
// seconds.
func TestUpstreamTimesInSeconds(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	before := time.Now().Unix()
	a := login(t, url, tokA, "laptop")
	b := login(t, url, tokA, "phone")
	inSeconds := func(what string, v int64) {
		t.Helper()
		if after := time.Now().Unix(); v < before || v > after {
			t.Errorf("%s = %d, want Unix seconds in [%d, %d]", what, v, before, after)
		}
	}
	n := nextStatus(t, a, b.ID)
	inSeconds("UserConnectionStatusNotification.user.connected_at", n.GetUser().GetConnectedAt())
	inSeconds("UserConnectionStatusNotification.timestamp", n.GetTimestamp())

	if err := a.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{}}); err != nil {
		t.Fatal(err)
	}
	for _, u := range expect(t, a, "GetOnlineUsers").GetGetOnlineUsersResponse().GetOnlineUsers() {
		inSeconds("OnlineUser.connected_at of "+u.GetNickname(), u.GetConnectedAt())
	}

	if err := b.Send(&pb.WebsocketMessage{Cmd: "SendChatMessage", SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: a.ID, Content: "hi"}}); err != nil {
		t.Fatal(err)
	}
	inSeconds("ChatMessage.sent_at", expect(t, a, "ChatMessageNotification").GetChatMessageNotification().GetChatMessage().GetSentAt())
}

// Upstream's web UI changes the nickname by sending UserLogin again on the
// open connection. The server answers with a login response for the same
// client and tells the others with a "connected" notification carrying the
// new nickname, which everything after uses.
func TestUpstreamRenameByLogin(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	a := login(t, url, tokA, "laptop")
	b := login(t, url, tokA, "phone")
	nextStatus(t, a, b.ID)

	if err := b.Send(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokA, Nickname: "  kitchen tablet "}); err != nil {
		t.Fatal(err)
	}
	r := expect(t, b, "UserLogin").GetUserLoginResponse()
	if !r.GetSuccess() || r.GetClientId() != b.ID || r.GetErrorMessage() != "" {
		t.Fatalf("rename answered %v, want success for client %s", r, b.ID)
	}
	n := nextStatus(t, a, b.ID)
	if n.GetStatus() != "connected" || n.GetUser().GetNickname() != "kitchen tablet" {
		t.Errorf("the others were told %v, want \"connected\" with the new nickname", n)
	}

	if err := a.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{}}); err != nil {
		t.Fatal(err)
	}
	us := expect(t, a, "GetOnlineUsers").GetGetOnlineUsersResponse().GetOnlineUsers()
	if len(us) != 2 || us[1].GetClientId() != b.ID || us[1].GetNickname() != "kitchen tablet" {
		t.Errorf("online users after the rename = %v", us)
	}
	if err := b.Send(&pb.WebsocketMessage{Cmd: "SendChatMessage", SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: a.ID, Content: "hi"}}); err != nil {
		t.Fatal(err)
	}
	if cm := expect(t, a, "ChatMessageNotification").GetChatMessageNotification().GetChatMessage(); cm.GetSenderNickname() != "kitchen tablet" {
		t.Errorf("chat after the rename comes from %q", cm.GetSenderNickname())
	}

	// The room stays the one the connection logged in to.
	if err := b.Send(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokB, Nickname: "hopper"}); err != nil {
		t.Fatal(err)
	}
	if e := expect(t, b, "Error").GetError(); e.GetCode() != "invalid_request" || e.GetCmd() != "UserLogin" {
		t.Errorf("login with another token on an open connection: %v", e)
	}
}

// topFields splits an encoded message into its top-level fields.
func topFields(t *testing.T, b []byte) map[protowire.Number][][]byte {
	t.Helper()
	out := map[protowire.Number][][]byte{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			t.Fatalf("bad field %d: %v", num, protowire.ParseError(m))
		}
		v := b[:m]
		if typ == protowire.BytesType {
			v, _ = protowire.ConsumeBytes(v)
		}
		out[num] = append(out[num], v)
		b = b[m:]
	}
	return out
}

// reencode is a received frame's bytes again (unknown fields kept).
func reencode(t *testing.T, m *pb.WebsocketMessage) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Upstream's generated code of the TaskFinish era has SendBackspaceRequest
// (receiver_client_id = 1) at WebsocketMessage field 25, Cmd
// "SendBackspace": the remote-input backspace. The server routes it to the
// receiver like a chat message, and its own frames never use field 25 for
// anything else.
func TestUpstreamField25IsSendBackspace(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	pc := login(t, url, tokA, "pc")
	phone := login(t, url, tokA, "phone")
	nextStatus(t, pc, phone.ID)

	// An Error frame (here: chat to a device that is not there) does not
	// use field 25.
	if err := phone.Send(&pb.WebsocketMessage{Cmd: "SendChatMessage", SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: "gone", Content: "x"}}); err != nil {
		t.Fatal(err)
	}
	e := expect(t, phone, "Error")
	if f := topFields(t, reencode(t, e)); len(f[25]) != 0 {
		t.Errorf("the Error frame uses field 25, which upstream clients decode as SendBackspaceRequest: %v", e)
	}

	// As upstream's code encodes it: Cmd = 1, SendBackspaceRequest = 25.
	var frame []byte
	frame = protowire.AppendTag(frame, 1, protowire.BytesType)
	frame = protowire.AppendString(frame, "SendBackspace")
	var req []byte
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	req = protowire.AppendString(req, pc.ID)
	frame = protowire.AppendTag(frame, 25, protowire.BytesType)
	frame = protowire.AppendBytes(frame, req)
	if err := phone.SendRaw(websocket.BinaryMessage, frame); err != nil {
		t.Fatal(err)
	}
	got := expect(t, pc, "SendBackspace")
	f := topFields(t, reencode(t, got))
	if len(f[25]) != 1 {
		t.Errorf("the receiver got %v, want field 25", got)
	} else if r := topFields(t, f[25][0])[1]; len(r) != 1 || string(r[0]) != pc.ID {
		t.Errorf("the receiver got %v, want receiver_client_id %s in field 25", got, pc.ID)
	}
	if got.GetStrParam() != phone.ID || got.GetNickname() != "phone" {
		t.Errorf("the receiver cannot tell who sent it: StrParam %q, Nickname %q", got.GetStrParam(), got.GetNickname())
	}
	if err := phone.Quiet(100 * time.Millisecond); err != nil {
		t.Errorf("the sender: %v", err)
	}

}

func agentClient(url string) agentassistprotoconnect.SrvAgentAssistClient {
	return agentassistprotoconnect.NewSrvAgentAssistClient(http.DefaultClient, url)
}

// msInRange checks a Unix-milliseconds timestamp.
func msInRange(t *testing.T, what string, v int64, from, to time.Time) {
	t.Helper()
	if v < from.UnixMilli() || v > to.UnixMilli() {
		t.Errorf("%s = %d, want Unix ms in [%d, %d]", what, v, from.UnixMilli(), to.UnixMilli())
	}
}

// The current upstream generation: its MCP binary calls WorkReport with the
// agent's, model's and MCP client's names; its web UI and app read the
// WorkReport Cmds and answer with WorkReportReply. The TaskFinish
// generation, on the same server at the same time, keeps its names.
func TestUpstreamWorkReportGeneration(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	current := login(t, url, tokA, "current web")
	old := login(t, url, tokA, "old app")
	nextStatus(t, current, old.ID)
	ag := agentClient(url)

	start := time.Now()
	type result struct {
		r   *pb.WorkReportResponse
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := ag.WorkReport(context.Background(), &pb.WorkReportRequest{
			ID: "wr-1", UserToken: tokA, Timestamp: 12345,
			Request: &pb.McpWorkReportRequest{
				ProjectDirectory: "/home/me/shop", Summary: "Refactored the payment module.", Timeout: 600,
				AgentName: "Claude Code", ReasoningModelName: "claude-opus-4", McpClientName: "claude-code",
			},
		})
		done <- result{r, err}
	}()

	// Each client finds the request under the name it knows; the same
	// event has the same Seq under both.
	var seq uint64
	for _, c := range []*wstest.Client{current, old} {
		tf := expect(t, c, "TaskFinish")
		wr := expect(t, c, "WorkReport")
		if tf.GetSeq() == 0 || tf.GetSeq() != wr.GetSeq() || (seq != 0 && tf.GetSeq() != seq) {
			t.Errorf("Seq: TaskFinish %d, WorkReport %d", tf.GetSeq(), wr.GetSeq())
		}
		seq = tf.GetSeq()
		for _, m := range []*pb.WebsocketMessage{tf, wr} {
			req := m.GetTaskFinishRequest() // field 3: upstream's WorkReportRequest
			r := req.GetRequest()
			if req.GetID() != "wr-1" || r.GetSummary() != "Refactored the payment module." || r.GetProjectDirectory() != "/home/me/shop" ||
				r.GetAgentName() != "Claude Code" || r.GetReasoningModelName() != "claude-opus-4" || r.GetMcpClientName() != "claude-code" {
				t.Errorf("%s frame: %v", m.Cmd, req)
			}
			msInRange(t, m.Cmd+".Timestamp", req.GetTimestamp(), start, time.Now())
		}
	}

	// A device that opens now lists it once, under the current name: the
	// current Flutter app (chat_provider.dart,
	// _handleGetPendingMessagesResponse) converts "WorkReport" with
	// work_report_request (field 3), logs "Failed to convert pending
	// message" for any other type, and shows totalCount.
	late := login(t, url, tokA, "late")
	if err := late.Send(&pb.WebsocketMessage{Cmd: "GetPendingMessages", GetPendingMessagesRequest: &pb.GetPendingMessagesRequest{}}); err != nil {
		t.Fatal(err)
	}
	ps := expect(t, late, "GetPendingMessages").GetGetPendingMessagesResponse()
	if len(ps.GetPendingMessages()) != 1 || ps.GetTotalCount() != 1 {
		t.Fatalf("pending list %v, want the report once, totalCount 1", ps)
	}
	if p := ps.GetPendingMessages()[0]; p.GetMessageType() != "WorkReport" || p.GetTaskFinishRequest().GetID() != "wr-1" || p.GetTaskFinishRequest().GetRequest().GetAgentName() != "Claude Code" {
		t.Errorf("pending: %v, want WorkReport wr-1", p)
	}

	// The current generation answers with WorkReportReply (fields 3 and 5).
	if err := current.Send(&pb.WebsocketMessage{
		Cmd:                "WorkReportReply",
		TaskFinishRequest:  &pb.TaskFinishRequest{ID: "wr-1"},
		TaskFinishResponse: &pb.TaskFinishResponse{ID: "wr-1", Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Looks good."}}}},
	}); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.r.GetID() != "wr-1" || len(res.r.GetContents()) != 1 || res.r.GetContents()[0].GetText().GetText() != "Looks good." {
		t.Fatalf("WorkReport returned %v, %v", res.r, res.err)
	}
	for _, cmd := range []string{"TaskFinishReplyNotification", "WorkReportReplyNotification"} {
		n := expect(t, old, cmd)
		if n.GetTaskFinishRequest().GetID() != "wr-1" || n.GetTaskFinishResponse().GetContents()[0].GetText().GetText() != "Looks good." || n.GetNickname() != "current web" {
			t.Errorf("%s: %v", cmd, n)
		}
	}

	// The TaskFinish generation still works: its RPC, its reply.
	go func() {
		r, err := ag.TaskFinish(context.Background(), &pb.TaskFinishRequest{ID: "tf-1", UserToken: tokA,
			Request: &pb.McpTaskFinishRequest{Summary: "Done.", Timeout: 600}})
		done <- result{&pb.WorkReportResponse{ID: r.GetID(), Contents: r.GetContents()}, err}
	}()
	expect(t, old, "TaskFinish")
	expect(t, old, "WorkReport")
	if err := old.Send(&pb.WebsocketMessage{
		Cmd:                "TaskFinishReply",
		TaskFinishRequest:  &pb.TaskFinishRequest{ID: "tf-1"},
		TaskFinishResponse: &pb.TaskFinishResponse{ID: "tf-1", Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "ok"}}}},
	}); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err != nil || res.r.GetID() != "tf-1" {
		t.Fatalf("TaskFinish returned %v, %v", res.r, res.err)
	}

	// The questions of the current generation carry the names too.
	go func() {
		_, err := ag.AskQuestion(context.Background(), &pb.AskQuestionRequest{ID: "q-1", UserToken: tokA,
			Request: &pb.McpAskQuestionRequest{Question: "Which database?", AgentName: "Cursor", ReasoningModelName: "gpt-5", McpClientName: "cursor-vscode"}})
		done <- result{nil, err}
	}()
	q := expect(t, old, "AskQuestion").GetAskQuestionRequest()
	if r := q.GetRequest(); r.GetAgentName() != "Cursor" || r.GetReasoningModelName() != "gpt-5" || r.GetMcpClientName() != "cursor-vscode" {
		t.Errorf("AskQuestion frame: %v", q)
	}
	msInRange(t, "AskQuestionRequest.Timestamp", q.GetTimestamp(), start, time.Now())
	if err := old.Send(wstest.TextReply("q-1", "Postgres")); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.err != nil {
		t.Fatal(res.err)
	}

	// A device that has answered a report with TaskFinishReply is of the
	// TaskFinish generation (its Flutter app before the rename converts
	// only "TaskFinish" with task_finish_request): it gets that name.
	waiting, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		_, _ = ag.TaskFinish(waiting, &pb.TaskFinishRequest{ID: "tf-2", UserToken: tokA, Request: &pb.McpTaskFinishRequest{Summary: "Again.", Timeout: 600}})
	}()
	expect(t, old, "TaskFinish")
	expect(t, old, "WorkReport")
	if err := old.Send(&pb.WebsocketMessage{Cmd: "GetPendingMessages", GetPendingMessagesRequest: &pb.GetPendingMessagesRequest{}}); err != nil {
		t.Fatal(err)
	}
	if ps := expect(t, old, "GetPendingMessages").GetGetPendingMessagesResponse(); len(ps.GetPendingMessages()) != 1 || ps.GetTotalCount() != 1 ||
		ps.GetPendingMessages()[0].GetMessageType() != "TaskFinish" || ps.GetPendingMessages()[0].GetTaskFinishRequest().GetID() != "tf-2" {
		t.Errorf("the TaskFinish generation's pending list: %v, want TaskFinish tf-2 once", ps)
	}

	// SendMcpClientInfo is accepted (with the token, like every call).
	info := &pb.McpClientInfoRequest{ID: "i-1", UserToken: tokA, Request: &pb.McpClientInfoData{ClientName: "windsurf", ClientVersion: "1.2", ProtocolVersion: "2025-06-18"}}
	if r, err := ag.SendMcpClientInfo(context.Background(), info); err != nil || !r.GetSuccess() {
		t.Errorf("SendMcpClientInfo: %v, %v", r, err)
	}
	info.UserToken = "wrong"
	if _, err := ag.SendMcpClientInfo(context.Background(), info); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("SendMcpClientInfo with a wrong token: %v", err)
	}
}

// until collects the frames before the next one with Cmd cmd, skipping
// presence notifications.
func until(t *testing.T, c *wstest.Client, cmd string) []string {
	t.Helper()
	var out []string
	for {
		m, err := c.Next(5 * time.Second)
		if err != nil {
			t.Fatalf("waiting for %s after %v: %v", cmd, out, err)
		}
		switch {
		case m.Cmd == cmd:
			return out
		case m.Cmd != "UserConnectionStatusNotification":
			out = append(out, m.Cmd+" "+m.GetAskQuestionRequest().GetID()+m.GetTaskFinishRequest().GetID())
		}
	}
}

// Upstream's web UI never asks for pending messages: after login it asks
// only for the online users. The server pushes it what was asked before it
// came, once; clients that ask (GetPendingMessages first, like upstream's
// app and our inbox) get the list and no push.
func TestPendingPushedToClientsThatDoNotAsk(t *testing.T) {
	s, url := newServer(t, inbox.Options{})
	h := s.Hub()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ask := func(kind wire.Kind, id string) {
		go func() {
			_, _ = h.Ask(ctx, tokA, hub.Request{Kind: kind, ID: id, Text: "about " + id, Timeout: time.Hour})
		}()
		waitFor(t, id+" pending", func() bool { return h.Validity(tokA, []string{id})[id] })
	}
	ask(wire.AskQuestion, "early-q")
	ask(wire.TaskFinish, "early-t")
	web := login(t, url, tokA, "upstream web")
	app := login(t, url, tokA, "upstream app")
	ask(wire.AskQuestion, "live-q") // delivered live: must not come twice
	for _, c := range []*wstest.Client{web, app} {
		if q := expect(t, c, "AskQuestion").GetAskQuestionRequest(); q.GetID() != "live-q" {
			t.Fatalf("live: %v", q)
		}
	}

	// The web UI's first request after login is GetOnlineUsers.
	for range 2 { // and the second time nothing more
		if err := web.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{}}); err != nil {
			t.Fatal(err)
		}
	}
	got := until(t, web, "GetOnlineUsers")
	want := []string{"AskQuestion early-q", "TaskFinish early-t", "WorkReport early-t"}
	if !slices.Equal(got, want) {
		t.Errorf("pushed before the first answer: %v, want %v", got, want)
	}
	if got := until(t, web, "GetOnlineUsers"); len(got) != 0 {
		t.Errorf("pushed again: %v", got)
	}

	// The app asks, and gets the list only.
	if err := app.Send(&pb.WebsocketMessage{Cmd: "GetPendingMessages", GetPendingMessagesRequest: &pb.GetPendingMessagesRequest{}}); err != nil {
		t.Fatal(err)
	}
	if n := len(expect(t, app, "GetPendingMessages").GetGetPendingMessagesResponse().GetPendingMessages()); n != 3 {
		t.Errorf("pending list of %d, want early-q, early-t, live-q", n)
	}
	if err := app.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{}}); err != nil {
		t.Fatal(err)
	}
	if got := until(t, app, "GetOnlineUsers"); len(got) != 0 {
		t.Errorf("a client that asked got a push as well: %v", got)
	}
}

// A client that never asks for the pending list and reads slowly (a phone)
// must not be disconnected by the push itself: with more pending requests
// than its send queue holds, it is pushed the newest that fit, and stays.
func TestPendingPushFitsTheSendQueue(t *testing.T) {
	const queue, n = 16, 64
	s, url := newServer(t, inbox.Options{SendQueue: queue})
	h := s.Hub()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	text := strings.Repeat("x", 256<<10) // 64 of them: far more than the sockets' buffers hold
	for i := range n {
		id := fmt.Sprintf("t%02d", i)
		go func() {
			_, _ = h.Ask(ctx, tokA, hub.Request{Kind: wire.TaskFinish, ID: id, Text: id + text, Timeout: time.Hour})
		}()
		waitFor(t, id+" pending", func() bool { return h.Validity(tokA, []string{id})[id] })
	}
	other := login(t, url, tokA, "other")

	// The slow client: a small receive buffer, and it reads nothing until
	// the server has handled its first request (it chats to the other
	// client right after it, which the server handles after it).
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(1 << 16)
		}
		return c, err
	}}
	ws, resp, err := d.Dial(strings.Replace(url, "http", "ws", 1)+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	defer ws.Close()
	send := func(m *pb.WebsocketMessage) {
		b, _ := proto.Marshal(m)
		if err := ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
			t.Fatal(err)
		}
	}
	send(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokA, Nickname: "slow phone"})
	if m := readFrame(t, ws); !m.GetUserLoginResponse().GetSuccess() {
		t.Fatalf("login: %v", m)
	}
	send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{}})
	users := expect(t, other, "UserConnectionStatusNotification")
	slow := users.GetUserConnectionStatusNotification().GetUser().GetClientId()
	send(&pb.WebsocketMessage{Cmd: "SendChatMessage", SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: other.ID, Content: "done?"}})
	if m := expect(t, other, "ChatMessageNotification"); m.GetChatMessageNotification().GetChatMessage().GetSenderClientId() != slow {
		t.Fatalf("chat from %v", m)
	}

	var ids []string
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		m := readFrame(t, ws)
		if m.Cmd == "GetOnlineUsers" {
			break
		}
		if m.Cmd == "WorkReport" {
			ids = append(ids, m.GetTaskFinishRequest().GetID())
		}
	}
	if len(ids) == 0 || !slices.IsSorted(ids) || ids[len(ids)-1] != fmt.Sprintf("t%02d", n-1) {
		t.Errorf("pushed %v: want the newest requests, oldest first", ids)
	}
}

// lockedBuffer is a log sink that the server's goroutines write to while
// the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A rename is a frame any logged-in client may send as fast as it likes:
// it must not cost a line of the server's log each at the default level
// (a storm of them wrote 100,000 lines a second).
func TestRenameStormIsQuiet(t *testing.T) {
	var logged lockedBuffer
	toks, err := auth.NewTokens(tokA, tokB)
	if err != nil {
		t.Fatal(err)
	}
	s := srv.New(srv.Options{Tokens: toks, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	defer s.Close()
	a := login(t, ts.URL, tokA, "laptop")
	b := login(t, ts.URL, tokA, "phone")
	nextStatus(t, a, b.ID)

	const n = 200
	for i := range n {
		if err := b.Send(&pb.WebsocketMessage{Cmd: "UserLogin", StrParam: tokA, Nickname: fmt.Sprintf("phone %d", i%2)}); err != nil {
			t.Fatal(err)
		}
		expect(t, b, "UserLogin")
	}
	if got := strings.Count(logged.String(), "renamed"); got > 0 {
		t.Errorf("%d renames logged %d lines at the default level", n, got)
	}
}

// Names are shown as plain text on one line: a nickname, or the agent,
// model and MCP client names an agent gives, lose the characters that are
// not text: C0 and C1 controls, line and paragraph separators, and the
// bidirectional controls that would make a name read as something else
// (U+202E turns what follows it around).
func TestNamesArePlainText(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	const odd = "\u202eCur\u0085sor\u2028\u2066 \u009b31m\u200f"
	c := login(t, url, tokA, "tab"+odd+"let")
	if err := c.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{}}); err != nil {
		t.Fatal(err)
	}
	if us := expect(t, c, "GetOnlineUsers").GetGetOnlineUsersResponse().GetOnlineUsers(); len(us) != 1 || us[0].GetNickname() != "tabCursor 31mlet" {
		t.Errorf("nickname shown as %q", us[0].GetNickname())
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = agentClient(url).WorkReport(ctx, &pb.WorkReportRequest{ID: "w-odd", UserToken: tokA, Request: &pb.McpWorkReportRequest{
			Summary: "done", AgentName: odd, ReasoningModelName: "gpt" + odd, McpClientName: odd + "x"}})
	}()
	r := expect(t, c, "TaskFinish").GetTaskFinishRequest().GetRequest()
	if r.GetAgentName() != "Cursor 31m" || r.GetReasoningModelName() != "gptCursor 31m" || r.GetMcpClientName() != "Cursor 31mx" {
		t.Errorf("names shown as %q, %q, %q", r.GetAgentName(), r.GetReasoningModelName(), r.GetMcpClientName())
	}

	expect(t, c, "WorkReport")

	// So is the nickname an answer over Connect gives (at most 128 bytes).
	reply := agentassistprotoconnect.NewSrvAgentAssistReplyClient(http.DefaultClient, url)
	if _, err := reply.TaskFinishReply(ctx, &pb.TaskFinishReplyRequest{UserToken: tokA, Nickname: "cli" + odd + strings.Repeat("y", 300),
		Response: &pb.TaskFinishResponse{ID: "w-odd"}}); err != nil {
		t.Fatal(err)
	}
	if n := expect(t, c, "TaskFinishReplyNotification").GetNickname(); n != "cliCursor 31m"+strings.Repeat("y", 128-len("cliCursor 31m")) {
		t.Errorf("the answer's nickname shown as %q", n)
	}
}

// pendingNames asks for the pending list as upstream's apps do on login
// and maps its task reports to their message_type.
func pendingNames(t *testing.T, c *wstest.Client) map[string]string {
	t.Helper()
	if err := c.Send(&pb.WebsocketMessage{Cmd: "GetPendingMessages", GetPendingMessagesRequest: &pb.GetPendingMessagesRequest{}}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ps := expect(t, c, "GetPendingMessages").GetGetPendingMessagesResponse()
	for _, p := range ps.GetPendingMessages() {
		out[p.GetTaskFinishRequest().GetID()] = p.GetMessageType()
	}
	if len(out) != len(ps.GetPendingMessages()) || ps.GetTotalCount() != int32(len(out)) {
		t.Errorf("pending list %v", ps)
	}
	return out
}

// Upstream's Flutter app sends GetPendingMessages as its first frame after
// login and converts only the entries of its generation's name: the
// TaskFinish-era app "TaskFinish", the current one "WorkReport". An app
// that opens after a report was asked lists it when its agent is of the
// same generation: the report is named by the RPC that asked it. A
// connection that has answered a report says its generation by the Cmd it
// answered with, and gets every report under that name.
func TestUpstreamAppsListReportsAskedWhileAway(t *testing.T) {
	_, url := newServer(t, inbox.Options{})
	watcher := login(t, url, tokA, "watcher")
	ag := agentClient(url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = ag.TaskFinish(ctx, &pb.TaskFinishRequest{ID: "tf-1", UserToken: tokA, Request: &pb.McpTaskFinishRequest{Summary: "Old agent done.", Timeout: 600}})
	}()
	expect(t, watcher, "TaskFinish") // live, under both names
	expect(t, watcher, "WorkReport")
	go func() {
		_, _ = ag.WorkReport(ctx, &pb.WorkReportRequest{ID: "wr-1", UserToken: tokA, Request: &pb.McpWorkReportRequest{Summary: "New agent done.", Timeout: 600}})
	}()
	expect(t, watcher, "TaskFinish")
	expect(t, watcher, "WorkReport")

	same := func(got map[string]string, want map[string]string) bool {
		return len(got) == len(want) && got["tf-1"] == want["tf-1"] && got["wr-1"] == want["wr-1"]
	}
	byAsker := map[string]string{"tf-1": "TaskFinish", "wr-1": "WorkReport"}
	for _, nick := range []string{"old app", "current app"} {
		if got := pendingNames(t, login(t, url, tokA, nick)); !same(got, byAsker) {
			t.Errorf("%s opening now lists %v, want %v", nick, got, byAsker)
		}
	}

	// An app that answered a report (here one another device answered
	// first) is of the generation of its reply's Cmd: every report is
	// listed to it under that generation's name.
	for _, tc := range []struct{ reply, name string }{{"TaskFinishReply", "TaskFinish"}, {"WorkReportReply", "WorkReport"}} {
		c := login(t, url, tokA, tc.reply+" app")
		pendingNames(t, c) // its first frame, as upstream's apps send
		if err := c.Send(&pb.WebsocketMessage{Cmd: tc.reply, TaskFinishRequest: &pb.TaskFinishRequest{ID: "answered-elsewhere"},
			TaskFinishResponse: &pb.TaskFinishResponse{ID: "answered-elsewhere", Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "ok"}}}}}); err != nil {
			t.Fatal(err)
		}
		if e := expect(t, c, "Error").GetError(); e.GetCode() != "not_pending" {
			t.Fatalf("answering a report no longer pending: %v", e)
		}
		if got, want := pendingNames(t, c), map[string]string{"tf-1": tc.name, "wr-1": tc.name}; !same(got, want) {
			t.Errorf("after %s the list is %v, want %v", tc.reply, got, want)
		}
	}
}
