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
		for !h.Validity(tokA, []string{id})[id] {
			time.Sleep(time.Millisecond)
		}
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
