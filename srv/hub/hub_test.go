package hub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

type fakeClient struct {
	id   string
	mu   sync.Mutex
	got  []*pb.WebsocketMessage
	wake chan struct{}
}

func newFake(id string) *fakeClient {
	return &fakeClient{id: id, wake: make(chan struct{}, 100)}
}

func (f *fakeClient) ID() string             { return f.id }
func (f *fakeClient) Nickname() string       { return "nick-" + f.id }
func (f *fakeClient) ConnectedAt() time.Time { return time.Unix(0, 0) }
func (f *fakeClient) Send(b []byte) bool {
	var m pb.WebsocketMessage
	if err := proto.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	f.mu.Lock()
	f.got = append(f.got, &m)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
	return true
}

// cmds lists the Cmds received, without presence notifications.
func (f *fakeClient) cmds() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.got {
		if m.Cmd != CmdUserConnectionStatusNotification {
			out = append(out, m.Cmd)
		}
	}
	return out
}

func (f *fakeClient) waitFor(t *testing.T, cmd string) *pb.WebsocketMessage {
	t.Helper()
	deadline := time.After(2 * time.Second)
	for {
		f.mu.Lock()
		for _, m := range f.got {
			if m.Cmd == cmd {
				f.mu.Unlock()
				return m
			}
		}
		f.mu.Unlock()
		select {
		case <-f.wake:
		case <-deadline:
			t.Fatalf("client %s never got %s; got %v", f.id, cmd, f.cmds())
		}
	}
}

func ask(h *Hub, token, id string, timeout time.Duration, ctx context.Context) (chan *Reply, chan error) {
	rc, ec := make(chan *Reply, 1), make(chan error, 1)
	go func() {
		r, err := h.Ask(ctx, token, Request{Kind: AskQuestion, ID: id, Text: "q?", Timeout: timeout})
		rc <- r
		ec <- err
	}()
	return rc, ec
}

func TestFirstAnswerWins(t *testing.T) {
	h := New(Options{})
	a, b, other := newFake("a"), newFake("b"), newFake("x")
	h.Join("tok", a, nil)
	h.Join("tok", b, nil)
	h.Join("other", other, nil)

	rc, ec := ask(h, "tok", "r1", time.Minute, context.Background())
	a.waitFor(t, CmdAskQuestion)
	b.waitFor(t, CmdAskQuestion)

	if err := h.Answer("tok", TaskFinish, "r1", Reply{ClientID: "a"}); !errors.Is(err, ErrNotPending) {
		t.Fatalf("answer of the wrong kind: %v", err)
	}
	if err := h.Answer("other", AskQuestion, "r1", Reply{ClientID: "x"}); !errors.Is(err, ErrNotPending) {
		t.Fatalf("answer from another token: %v", err)
	}
	if err := h.Answer("tok", AskQuestion, "r1", Reply{ClientID: "a", Meta: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.Answer("tok", AskQuestion, "r1", Reply{ClientID: "b"}); !errors.Is(err, ErrNotPending) {
		t.Fatalf("second answer: %v", err)
	}
	if r := <-rc; r == nil || r.ClientID != "a" || r.Meta["k"] != "v" {
		t.Fatalf("reply = %+v", r)
	}
	if err := <-ec; err != nil {
		t.Fatal(err)
	}
	n := b.waitFor(t, CmdAskQuestionReplyNotification)
	if n.GetAskQuestionRequest().GetID() != "r1" || n.GetAskQuestionResponse().GetMeta()["k"] != "v" {
		t.Errorf("notification = %v", n)
	}
	if got := a.cmds(); len(got) != 1 {
		t.Errorf("answering client got %v, want only the request", got)
	}
	if got := other.cmds(); len(got) != 0 {
		t.Errorf("client of another token got %v", got)
	}
	if ps := h.PendingMessages("tok"); len(ps) != 0 {
		t.Errorf("still pending: %v", ps)
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	h := New(Options{})
	c := newFake("c")
	h.Join("tok", c, nil)

	_, ec := ask(h, "tok", "slow", 50*time.Millisecond, context.Background())
	if err := <-ec; !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	m := c.waitFor(t, CmdRequestCancelled)
	if n := m.GetRequestCancelledNotification(); n.GetRequestId() != "slow" || n.GetReason() != "timeout" || n.GetMessageType() != "AskQuestion" {
		t.Errorf("cancel notification = %v", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	_, ec = ask(h, "tok", "gone", time.Minute, ctx)
	c.waitFor(t, CmdAskQuestion)
	for len(h.PendingMessages("tok")) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-ec; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if v := h.Validity("tok", []string{"gone", "slow"}); v["gone"] || v["slow"] {
		t.Errorf("validity after cancel = %v", v)
	}
}

func TestPendingBeforeLoginAndDuplicates(t *testing.T) {
	h := New(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc, _ := ask(h, "tok", "early", time.Minute, ctx)
	for len(h.PendingMessages("tok")) == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := h.Ask(ctx, "tok", Request{Kind: AskQuestion, ID: "early", Text: "again"}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate ID: %v", err)
	}
	ps := h.PendingMessages("tok")
	if len(ps) != 1 || ps[0].GetAskQuestionRequest().GetID() != "early" || ps[0].GetTimeout() != 60 {
		t.Fatalf("pending = %v", ps)
	}
	if len(h.PendingMessages("other")) != 0 {
		t.Fatal("pending leaked to another token")
	}
	late := newFake("late")
	h.Join("tok", late, nil)
	if err := h.Answer("tok", AskQuestion, "early", Reply{ClientID: "late"}); err != nil {
		t.Fatal(err)
	}
	if r := <-rc; r.ClientID != "late" {
		t.Fatalf("reply from %q", r.ClientID)
	}
}

func TestClose(t *testing.T) {
	h := New(Options{})
	c := newFake("c")
	h.Join("tok", c, nil)
	_, ec := ask(h, "tok", "r", time.Minute, context.Background())
	c.waitFor(t, CmdAskQuestion)
	h.Close()
	h.Close()
	if err := <-ec; !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
	if got := c.cmds(); len(got) != 1 {
		t.Errorf("clients told %v on shutdown, want nothing", got)
	}
}

func TestPresenceAndChat(t *testing.T) {
	h := New(Options{})
	a, b, x := newFake("a"), newFake("b"), newFake("x")
	h.Join("tok", a, nil)
	h.Join("tok", b, nil)
	h.Join("other", x, nil)
	st := a.waitFor(t, CmdUserConnectionStatusNotification)
	if u := st.GetUserConnectionStatusNotification(); u.GetUser().GetClientId() != "b" || u.GetStatus() != "online" {
		t.Errorf("status = %v", u)
	}
	if us := h.OnlineUsers("tok"); len(us) != 2 || us[0].GetClientId() != "a" || us[1].GetClientId() != "b" {
		t.Errorf("online users = %v", us)
	}
	if _, err := h.Chat("tok", a, "b", "hello"); err != nil {
		t.Fatal(err)
	}
	m := b.waitFor(t, CmdChatMessageNotification).GetChatMessageNotification().GetChatMessage()
	if m.GetContent() != "hello" || m.GetSenderClientId() != "a" || m.GetReceiverNickname() != "nick-b" {
		t.Errorf("chat = %v", m)
	}
	if _, err := h.Chat("tok", a, "x", "across"); !errors.Is(err, ErrNoReceiver) {
		t.Errorf("chat to another token's client: %v", err)
	}
	if got := x.cmds(); len(got) != 0 {
		t.Errorf("other token got %v", got)
	}
	h.Leave("tok", b)
	deadline := time.Now().Add(2 * time.Second)
	for {
		a.mu.Lock()
		off := false
		for _, m := range a.got {
			if u := m.GetUserConnectionStatusNotification(); u.GetStatus() == "offline" && u.GetUser().GetClientId() == "b" {
				off = true
			}
		}
		a.mu.Unlock()
		if off {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no offline notification")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPresenceCoalesced: a crowd joining a small room at once costs each
// client one online-users list, not a frame per arrival.
func TestPresenceCoalesced(t *testing.T) {
	h := New(Options{PresenceDelay: 30 * time.Millisecond})
	watcher := newFake("watcher")
	h.Join("tok", watcher, nil)
	time.Sleep(60 * time.Millisecond)
	for i := range 40 {
		h.Join("tok", newFake(fmt.Sprint("c", i)), nil)
	}
	m := watcher.waitFor(t, CmdGetOnlineUsers)
	if n := m.GetGetOnlineUsersResponse().GetTotalCount(); n != 41 {
		t.Errorf("list of %d", n)
	}
	time.Sleep(60 * time.Millisecond)
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	if len(watcher.got) > 3 {
		t.Errorf("the watcher got %d frames for 40 arrivals", len(watcher.got))
	}
}

// TestBigRoomPresence: past bigRoom clients, a crowd costs each client one
// small "changed" notice, not the list.
func TestBigRoomPresence(t *testing.T) {
	h := New(Options{PresenceDelay: 10 * time.Millisecond})
	watcher := newFake("watcher")
	h.Join("tok", watcher, nil)
	for i := range bigRoom + 10 {
		h.Join("tok", newFake(fmt.Sprint("c", i)), nil)
	}
	time.Sleep(bigRoomDelay + 100*time.Millisecond)
	watcher.mu.Lock()
	before := len(watcher.got)
	watcher.mu.Unlock()
	for i := range 200 {
		h.Join("tok", newFake(fmt.Sprint("d", i)), nil)
	}
	time.Sleep(bigRoomDelay + 100*time.Millisecond)
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	got := watcher.got[before:]
	if len(got) != 1 || got[0].GetUserConnectionStatusNotification().GetStatus() != StatusChanged {
		t.Fatalf("200 arrivals in a big room gave the watcher %d frames: %v", len(got), got)
	}
}
