package e2e

import (
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// upstreamWeb logs in as upstream's web UI does on every (re)connect
// (web/src/services/websocket.ts, onopen → sendUserLogin; then
// web/src/stores/chat.ts, handleUserLoginResponse → requestOnlineUsers)
// and returns the IDs of the AskQuestion frames pushed before the
// GetOnlineUsers answer.
func upstreamWeb(t *testing.T, s *server, nick string) (*wstest.Client, []string) {
	t.Helper()
	var c *wstest.Client
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		c, err = wstest.Dial(s.URL, s.Token, nick, nil)
		if err == nil && c.Login.GetSuccess() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("login: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // the server is starting
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{UserToken: s.Token}}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for {
		m, err := c.Next(10 * time.Second)
		if err != nil {
			t.Fatalf("waiting for GetOnlineUsers after %v: %v", ids, err)
		}
		switch m.Cmd {
		case "GetOnlineUsers":
			return c, ids
		case "AskQuestion":
			ids = append(ids, m.GetAskQuestionRequest().GetID())
		}
	}
}

// TestUpstreamWebAfterRestartNoSecondCard: upstream's web UI keeps its
// cards when the server restarts and reconnects (it adds every
// AskQuestion frame as a new card, chat.ts handleAskQuestion), so the
// question it shows is not pushed to it again; a browser opened after the
// restart gets it.
func TestUpstreamWebAfterRestartNoSecondCard(t *testing.T) {
	port, data := freePort(t), t.TempDir()
	s := startServerWith(t, port, data, nil, tokenA)
	agent := startMCP(t, s, tokenA)
	_ = askAsync(agent, "Keep the old cache?")
	_, id := pendingQuestion(t, s, "Keep the old cache?")

	const nick = "聪明的开发者123"
	if _, got := upstreamWeb(t, s, nick); len(got) != 1 || got[0] != id {
		t.Fatalf("first open: pushed %v, want [%s]", got, id)
	}

	s.stopCleanly(t)
	s2 := startServerWith(t, port, data, nil, tokenA)
	if _, got := upstreamWeb(t, s2, nick); len(got) != 0 {
		t.Errorf("the page that reconnected after the restart was pushed %v again: a second card", got)
	}
	if _, got := upstreamWeb(t, s2, "友善的伙伴7"); len(got) != 1 || got[0] != id {
		t.Errorf("a browser opened after the restart: pushed %v, want [%s]", got, id)
	}
}
