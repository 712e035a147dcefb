package srv_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

// upstreamWebLogin logs in as upstream's web UI does on every (re)connect
// (web/src/services/websocket.ts, connect → onopen → sendUserLogin; then
// web/src/stores/chat.ts, handleUserLoginResponse → requestOnlineUsers):
// UserLogin with the token and the nickname kept in localStorage, then
// GetOnlineUsers. It never sends GetPendingMessages. It returns the
// requests pushed before the GetOnlineUsers answer.
func upstreamWebLogin(t *testing.T, url, nick string) (*wstest.Client, []string) {
	t.Helper()
	c := login(t, url, tokA, nick)
	if err := c.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{UserToken: tokA}}); err != nil {
		t.Fatal(err)
	}
	return c, until(t, c, "GetOnlineUsers")
}

// Upstream's web UI keeps its cards across a reconnect and adds every
// AskQuestion frame as a new card without looking for its ID
// (web/src/stores/chat.ts, handleAskQuestion: messages.value.push); a
// reply or a notice updates only the first card of an ID
// (messages.value.find). So a request pushed again after a reconnect is a
// second card that never clears. A reload starts from no cards; the
// browser then closes the socket with a close frame (1001).
func TestUpstreamWebReconnectGetsEachRequestOnce(t *testing.T) {
	s, url := newServer(t, inbox.Options{})
	h := s.Hub()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ask := func(id string) {
		go func() {
			_, _ = h.Ask(ctx, tokA, hub.Request{Kind: wire.AskQuestion, ID: id, Text: "about " + id, Timeout: time.Hour})
		}()
		waitFor(t, id+" pending", func() bool { return h.Validity(tokA, []string{id})[id] })
	}
	watcher := login(t, url, tokA, "watcher")
	ask("q1")
	expect(t, watcher, "AskQuestion")

	const nick = "聪明的开发者123"
	web, got := upstreamWebLogin(t, url, nick)
	if want := []string{"AskQuestion q1"}; !slices.Equal(got, want) {
		t.Fatalf("first open: pushed %v, want %v", got, want)
	}
	ask("q2") // reaches the open page live
	if m := expect(t, web, "AskQuestion"); m.GetAskQuestionRequest().GetID() != "q2" {
		t.Fatalf("live: %v", m)
	}
	expect(t, watcher, "AskQuestion")

	// The network drops (no close frame); a request is asked meanwhile.
	_ = web.Close()
	nextStatus(t, watcher, web.ID)
	ask("q3")
	expect(t, watcher, "AskQuestion")

	// The page reconnects with its cards: only what it has not seen.
	web, got = upstreamWebLogin(t, url, nick)
	if want := []string{"AskQuestion q3"}; !slices.Equal(got, want) {
		t.Errorf("after a reconnect: pushed %v, want %v", got, want)
	}

	// A reload: the browser closes the socket, the new page has no cards.
	if err := web.Conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, ""), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	nextStatus(t, watcher, web.ID)
	_ = web.Close()
	_, got = upstreamWebLogin(t, url, nick)
	if want := []string{"AskQuestion q1", "AskQuestion q2", "AskQuestion q3"}; !slices.Equal(got, want) {
		t.Errorf("after a reload: pushed %v, want %v", got, want)
	}

	// Another browser (another nickname) that opens now gets them all.
	if _, got = upstreamWebLogin(t, url, "友善的伙伴7"); len(got) != 3 {
		t.Errorf("another browser: pushed %v, want q1 q2 q3", got)
	}
}

// Upstream's web UI never asks whether a card is still waiting
// (CheckMessageValidity): it learns that a request settled only from the
// frame that announces it (web/src/stores/chat.ts,
// handleAskQuestionReplyNotification, handleRequestCancelled). A page whose
// connection dropped without a close frame keeps its cards; what settled
// while it was away is told to it at its next login, in those frames, or
// its cards wait forever. What is still pending is not pushed again, and
// another token's page of the same nickname hears nothing of it.
func TestUpstreamWebReconnectIsToldWhatSettled(t *testing.T) {
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
	watcher := login(t, url, tokA, "watcher")
	for _, id := range []string{"q1", "q2", "q3"} {
		ask(wire.AskQuestion, id)
		expect(t, watcher, "AskQuestion")
	}
	ask(wire.TaskFinish, "t1")
	expect(t, watcher, "TaskFinish")
	expect(t, watcher, "WorkReport")

	const nick = "聪明的开发者123"
	web, got := upstreamWebLogin(t, url, nick)
	if want := []string{"AskQuestion q1", "AskQuestion q2", "AskQuestion q3", "TaskFinish t1", "WorkReport t1"}; !slices.Equal(got, want) {
		t.Fatalf("first open: pushed %v, want %v", got, want)
	}
	other, _ := upstreamWebLoginFrames(t, url, tokB, nick)

	// The network drops (no close frame). Meanwhile q1 is answered on
	// another device, q2 withdrawn by its agent, t1 confirmed, q4 asked;
	// q3 still waits.
	_ = web.Close()
	_ = other.Close()
	nextStatus(t, watcher, web.ID)
	if err := watcher.Send(&pb.WebsocketMessage{Cmd: "AskQuestionReply",
		AskQuestionRequest:  &pb.AskQuestionRequest{ID: "q1"},
		AskQuestionResponse: &pb.AskQuestionResponse{ID: "q1", Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "yes, go on"}}}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := h.Cancel(context.Background(), tokA, "q2"); err != nil {
		t.Fatal(err)
	}
	if err := h.Answer(context.Background(), tokA, wire.TaskFinish, "t1", hub.Reply{Nickname: "watcher", ClientID: watcher.ID,
		Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "seen"}}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "q1 settled", func() bool { return !h.Validity(tokA, []string{"q1"})["q1"] })
	ask(wire.AskQuestion, "q4")

	_, ms := upstreamWebLoginFrames(t, url, tokA, nick)
	got = nil
	for _, m := range ms {
		got = append(got, describe(m))
	}
	want := []string{
		"AskQuestionReplyNotification q1 yes, go on",
		"RequestCancelled q2 cancelled AskQuestion",
		"TaskFinishReplyNotification t1 seen",
		"WorkReportReplyNotification t1 seen",
		"AskQuestion q4",
	}
	if !slices.Equal(got, want) {
		t.Errorf("after a reconnect: got\n%q\nwant\n%q", got, want)
	}

	// The same nickname under another token: nothing of token A's.
	_, ms = upstreamWebLoginFrames(t, url, tokB, nick)
	if len(ms) != 0 {
		t.Errorf("token B's page was sent %v", ms)
	}
}

// upstreamWebLoginFrames logs in as upstream's web UI does and returns the
// frames sent before the GetOnlineUsers answer, presence left out.
func upstreamWebLoginFrames(t *testing.T, url, tok, nick string) (*wstest.Client, []*pb.WebsocketMessage) {
	t.Helper()
	c := login(t, url, tok, nick)
	if err := c.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{UserToken: tok}}); err != nil {
		t.Fatal(err)
	}
	var out []*pb.WebsocketMessage
	for {
		m, err := c.Next(5 * time.Second)
		if err != nil {
			t.Fatalf("waiting for GetOnlineUsers after %v: %v", out, err)
		}
		switch {
		case m.Cmd == "GetOnlineUsers":
			return c, out
		case m.Cmd != "UserConnectionStatusNotification":
			out = append(out, m)
		}
	}
}

// describe names a frame by its Cmd, request ID and what it says.
func describe(m *pb.WebsocketMessage) string {
	switch {
	case m.GetRequestCancelledNotification() != nil:
		n := m.GetRequestCancelledNotification()
		return m.Cmd + " " + n.GetRequestId() + " " + n.GetReason() + " " + n.GetMessageType()
	case m.GetAskQuestionResponse() != nil:
		return m.Cmd + " " + m.GetAskQuestionRequest().GetID() + " " + m.GetAskQuestionResponse().GetContents()[0].GetText().GetText()
	case m.GetTaskFinishResponse() != nil:
		return m.Cmd + " " + m.GetTaskFinishRequest().GetID() + " " + m.GetTaskFinishResponse().GetContents()[0].GetText().GetText()
	}
	return m.Cmd + " " + m.GetAskQuestionRequest().GetID() + m.GetTaskFinishRequest().GetID()
}
