package inbox_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gorilla/websocket"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

// TestLogin: UserLogin with a token of the server joins that token's
// room under a clean nickname; a wrong token, or a full room, is told so
// and the connection is closed (1008), never joining.
func TestLogin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		token    string
		nickname string
		already  int    // clients of the room before it
		refused  string // the refusal, or "" for a login
		want     string // the nickname it joins under ("User_" + the ID's start when empty)
	}{
		{name: "the token", token: tokA, nickname: "phone", want: "phone"},
		{name: "a nickname to clean", token: tokA, nickname: " \u202ephone\n\x00 ", want: "phone"},
		{name: "a nickname too long", token: tokA, nickname: strings.Repeat("ü", 70), want: strings.Repeat("ü", 64)},
		{name: "no nickname", token: tokA},
		{name: "a wrong token", token: "not-a-token", nickname: "phone", refused: "invalid token"},
		{name: "no token", nickname: "phone", refused: "invalid token"},
		{name: "a full room", token: tokA, nickname: "phone", already: 2, refused: hub.ErrRoomFull.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				f := start(t, inbox.Options{MaxPerToken: 2})
				for range tc.already {
					f.login(t, tokA, "laptop")
				}
				c := f.connect(t)
				if err := c.LogIn(tc.token, tc.nickname, "", 0); err != nil {
					t.Fatal(err)
				}
				if tc.refused != "" {
					if c.Login.GetSuccess() || c.Login.GetErrorMessage() != tc.refused {
						t.Fatalf("login answered %v", c.Login)
					}
					if code, text := closed(t, c); code != websocket.ClosePolicyViolation || text != tc.refused {
						t.Fatalf("closed with %d %q", code, text)
					}
					if n, _ := f.hub.Status(tokA); n != tc.already {
						t.Fatalf("%d clients in the room, want %d", n, tc.already)
					}
					return
				}
				if !c.Login.GetSuccess() || c.ID == "" || c.Login.GetEpoch() != f.hub.Epoch() {
					t.Fatalf("login answered %v", c.Login)
				}
				want := tc.want
				if want == "" {
					want = "User_" + c.ID[:6]
				}
				var got []string
				for _, u := range f.hub.OnlineUsers(tc.token) {
					if u.ID == c.ID {
						got = append(got, u.Nickname)
					}
				}
				if len(got) != 1 || got[0] != want {
					t.Fatalf("in the room as %q, want %q", got, want)
				}
				if n, _ := f.hub.Status(tokB); n != 0 {
					t.Fatalf("%d clients in the other room", n)
				}
			})
		})
	}
}

// TestWrongLoginsAreHeldBack: past its address's budget of failed logins
// a wrong token's answer is held back (auth.Limiter); the right token is
// never held.
func TestWrongLoginsAreHeldBack(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		limiter := auth.NewLimiter(1, time.Hour)
		var held []time.Duration
		limiter.Hold = func(d time.Duration, _ <-chan struct{}) { held = append(held, d) }
		f := start(t, inbox.Options{Limiter: limiter})
		for range 2 {
			c := f.connect(t)
			if err := c.LogIn("not-a-token", "phone", "", 0); err != nil || c.Login.GetSuccess() {
				t.Fatalf("login answered %v, %v", c.Login, err)
			}
		}
		f.login(t, tokA, "phone")
		if len(held) != 1 || held[0] <= 0 {
			t.Fatalf("held back %v, want the second wrong login alone", held)
		}
	})
}

// TestFramesBeforeLogin: before UserLogin a client is told to log in
// first, whatever it sends, and stays connected to do so; nothing it sent
// reached the hub.
func TestFramesBeforeLogin(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := start(t, inbox.Options{})
		c := f.connect(t)
		for _, tc := range []struct {
			send func() error
			code string
			cmd  string
		}{
			{func() error { return c.Send(&pb.WebsocketMessage{Cmd: wire.CmdGetPendingMessages}) }, "not_logged_in", wire.CmdGetPendingMessages},
			{func() error {
				return c.Send(&pb.WebsocketMessage{Cmd: wire.CmdSendChatMessage, SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: "x", Content: "hi"}})
			}, "not_logged_in", wire.CmdSendChatMessage},
			{func() error { return c.SendRaw(websocket.TextMessage, []byte(`{"cmd":"UserLogin"}`)) }, "malformed_frame", ""},
			{func() error { return c.SendRaw(websocket.BinaryMessage, []byte{0xff, 0xff, 0xff}) }, "malformed_frame", ""},
		} {
			if err := tc.send(); err != nil {
				t.Fatal(err)
			}
			e := expect(t, c, wire.CmdError).GetError()
			if e.GetCode() != tc.code || e.GetCmd() != tc.cmd {
				t.Fatalf("told %v, want %s about %q", e, tc.code, tc.cmd)
			}
		}
		if n, _ := f.hub.Status(tokA); n != 0 {
			t.Fatalf("%d clients in the room before the login", n)
		}
		if err := c.LogIn(tokA, "phone", "", 0); err != nil || !c.Login.GetSuccess() {
			t.Fatalf("login after the frames: %v, %v", c.Login, err)
		}
	})
}

// TestLoginDeadline: a connection that has not logged in within
// LoginTimeout is closed (1008 "login timeout"); one that logged in in
// time stays.
func TestLoginDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 10 * time.Second
	synctest.Test(t, func(t *testing.T) {
		f := start(t, inbox.Options{LoginTimeout: timeout})
		silent := f.connect(t)
		late := f.connect(t)
		time.Sleep(timeout - time.Nanosecond)
		synctest.Wait()
		if n := f.handler.Count(); n != 2 {
			t.Fatalf("%d connections open just before the deadline", n)
		}
		if err := late.LogIn(tokA, "phone", "", 0); err != nil || !late.Login.GetSuccess() {
			t.Fatalf("login just in time: %v, %v", late.Login, err)
		}
		time.Sleep(time.Nanosecond)
		if code, text := closed(t, silent); code != websocket.ClosePolicyViolation || text != "login timeout" {
			t.Fatalf("closed with %d %q", code, text)
		}
		time.Sleep(timeout)
		synctest.Wait()
		if n, _ := f.hub.Status(tokA); n != 1 {
			t.Fatalf("%d clients logged in, want the one in time", n)
		}
	})
}
