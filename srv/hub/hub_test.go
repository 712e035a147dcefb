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
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
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
		if m.Cmd != wire.CmdUserConnectionStatusNotification {
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
		r, err := h.Ask(ctx, token, Request{Kind: wire.AskQuestion, ID: id, Text: "q?", Timeout: timeout})
		rc <- r
		ec <- err
	}()
	return rc, ec
}

func TestFirstAnswerWins(t *testing.T) {
	h := New(Options{})
	a, b, other := newFake("a"), newFake("b"), newFake("x")
	h.Join("tok", a, nil, Resume{})
	h.Join("tok", b, nil, Resume{})
	h.Join("other", other, nil, Resume{})

	rc, ec := ask(h, "tok", "r1", time.Minute, context.Background())
	a.waitFor(t, wire.CmdAskQuestion)
	b.waitFor(t, wire.CmdAskQuestion)

	if err := h.Answer("tok", wire.TaskFinish, "r1", Reply{ClientID: "a"}); !errors.Is(err, ErrNotPending) {
		t.Fatalf("answer of the wrong kind: %v", err)
	}
	if err := h.Answer("other", wire.AskQuestion, "r1", Reply{ClientID: "x"}); !errors.Is(err, ErrNotPending) {
		t.Fatalf("answer from another token: %v", err)
	}
	if err := h.Answer("tok", wire.AskQuestion, "r1", Reply{ClientID: "a", Meta: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.Answer("tok", wire.AskQuestion, "r1", Reply{ClientID: "b"}); !errors.Is(err, ErrNotPending) {
		t.Fatalf("second answer: %v", err)
	}
	if r := <-rc; r == nil || r.ClientID != "a" || r.Meta["k"] != "v" {
		t.Fatalf("reply = %+v", r)
	}
	if err := <-ec; err != nil {
		t.Fatal(err)
	}
	n := b.waitFor(t, wire.CmdAskQuestionReplyNotification)
	if n.GetAskQuestionRequest().GetID() != "r1" || n.GetAskQuestionResponse().GetMeta()["k"] != "v" {
		t.Errorf("notification = %v", n)
	}
	if got := a.cmds(); len(got) != 1 {
		t.Errorf("answering client got %v, want only the request", got)
	}
	if got := other.cmds(); len(got) != 0 {
		t.Errorf("client of another token got %v", got)
	}
	if ps := pendingOf(h, "tok"); len(ps) != 0 {
		t.Errorf("still pending: %v", ps)
	}
}

func TestTimeoutCancelAndOrphan(t *testing.T) {
	h := New(Options{OrphanGrace: 100 * time.Millisecond})
	c := newFake("c")
	h.Join("tok", c, nil, Resume{})

	_, ec := ask(h, "tok", "slow", 50*time.Millisecond, context.Background())
	if err := <-ec; !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	m := c.waitFor(t, wire.CmdRequestCancelled)
	if n := m.GetRequestCancelledNotification(); n.GetRequestId() != "slow" || n.GetReason() != "timeout" || n.GetMessageType() != "AskQuestion" {
		t.Errorf("cancel notification = %v", n)
	}

	// The caller going away (a dropped connection looks the same) leaves
	// the request pending, orphaned, for the grace period.
	ctx, cancel := context.WithCancel(context.Background())
	_, ec = ask(h, "tok", "gone", time.Minute, ctx)
	for !h.Validity("tok", []string{"gone"})["gone"] {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-ec; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if v := h.Validity("tok", []string{"gone"}); !v["gone"] {
		t.Fatal("withdrawn at once; it should wait for its agent to come back")
	}
	deadline := time.Now().Add(2 * time.Second)
	for h.Validity("tok", []string{"gone"})["gone"] {
		if time.Now().After(deadline) {
			t.Fatal("orphan never withdrawn")
		}
		time.Sleep(10 * time.Millisecond)
	}
	reason := ""
	for reason == "" && time.Now().Before(deadline) {
		c.mu.Lock()
		for _, m := range c.got {
			if n := m.GetRequestCancelledNotification(); n.GetRequestId() == "gone" {
				reason = n.GetReason()
			}
		}
		c.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	if reason != "abandoned" {
		t.Errorf("orphan withdrawn with reason %q", reason)
	}

	// An explicit cancel withdraws at once.
	_, ec = ask(h, "tok", "cancel-me", time.Minute, context.Background())
	for !h.Validity("tok", []string{"cancel-me"})["cancel-me"] {
		time.Sleep(time.Millisecond)
	}
	if err := h.Cancel("other", "cancel-me"); !errors.Is(err, ErrNotPending) {
		t.Errorf("cancel from another token: %v", err)
	}
	if err := h.Cancel("tok", "cancel-me"); err != nil {
		t.Fatal(err)
	}
	if err := <-ec; !errors.Is(err, ErrWithdrawn) {
		t.Fatalf("err = %v, want ErrWithdrawn", err)
	}
}

func TestPendingBeforeLogin(t *testing.T) {
	h := New(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc, _ := ask(h, "tok", "early", time.Minute, ctx)
	for len(pendingOf(h, "tok")) == 0 {
		time.Sleep(time.Millisecond)
	}
	ps := pendingOf(h, "tok")
	if len(ps) != 1 || ps[0].GetAskQuestionRequest().GetID() != "early" || ps[0].GetTimeout() != 60 {
		t.Fatalf("pending = %v", ps)
	}
	if len(pendingOf(h, "other")) != 0 {
		t.Fatal("pending leaked to another token")
	}
	h.Join("tok", newFake("late"), nil, Resume{})
	if err := h.Answer("tok", wire.AskQuestion, "early", Reply{ClientID: "late"}); err != nil {
		t.Fatal(err)
	}
	if r := <-rc; r.ClientID != "late" {
		t.Fatalf("reply from %q", r.ClientID)
	}
}

func TestReattach(t *testing.T) {
	h := New(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	_, ec := ask(h, "tok", "r1", time.Minute, ctx)
	for !h.Validity("tok", []string{"r1"})["r1"] {
		time.Sleep(time.Millisecond)
	}
	cancel() // the agent's connection dropped
	<-ec
	// It asks again with the same ID: re-attached, not asked twice.
	rc, ec2 := ask(h, "tok", "r1", time.Minute, context.Background())
	time.Sleep(20 * time.Millisecond)
	if ps := pendingOf(h, "tok"); len(ps) != 1 {
		t.Fatalf("pending = %v", ps)
	}
	if err := h.Answer("tok", wire.AskQuestion, "r1", Reply{ClientID: "phone"}); err != nil {
		t.Fatal(err)
	}
	if r := <-rc; r.ClientID != "phone" || <-ec2 != nil {
		t.Fatalf("re-attached call got %+v", r)
	}
	// Answered while the agent was away: asking again hands the answer over.
	r, err := h.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "r1", Text: "q?", Timeout: time.Minute})
	if err != nil || r.ClientID != "phone" {
		t.Fatalf("after the answer: %+v %v", r, err)
	}
	// A pending ID asked as the other kind is refused.
	_, _ = ask(h, "tok", "r2", time.Minute, context.Background())
	for !h.Validity("tok", []string{"r2"})["r2"] {
		time.Sleep(time.Millisecond)
	}
	if _, err := h.Ask(context.Background(), "tok", Request{Kind: wire.TaskFinish, ID: "r2", Text: "q?", Timeout: time.Minute}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("the same ID as another kind: %v", err)
	}
}

func TestRestoreAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := New(Options{Store: db})
	ctx, cancel := context.WithCancel(context.Background())
	_, ec := ask(h, "tok", "survivor", time.Minute, ctx)
	_, ec2 := ask(h, "tok", "answered", time.Minute, context.Background())
	for len(pendingOf(h, "tok")) < 2 {
		time.Sleep(time.Millisecond)
	}
	img := &pb.McpResultContent{Type: 2, Image: &pb.ImageContent{Data: "AAAA", MimeType: "image/png"}}
	if err := h.Answer("tok", wire.AskQuestion, "answered", Reply{ClientID: "pc", Nickname: "laptop", Contents: []*pb.McpResultContent{img}}); err != nil {
		t.Fatal(err)
	}
	<-ec2
	h.Close() // the server stops; "survivor" stays pending in the store
	cancel()
	<-ec
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h2 := New(Options{Store: db})
	p, s, err := h2.Restore([]string{"tok", "unrelated-token"})
	if err != nil || p != 1 || s != 1 {
		t.Fatalf("restored %d pending, %d settled: %v", p, s, err)
	}
	h2.Join("tok", newFake("late"), nil, Resume{})
	if ps := pendingOf(h2, "tok"); len(ps) != 1 || ps[0].GetAskQuestionRequest().GetID() != "survivor" {
		t.Fatalf("pending after restart = %v", ps)
	}
	rc, ec3 := ask(h2, "tok", "survivor", time.Minute, context.Background()) // the agent re-attaches
	time.Sleep(20 * time.Millisecond)
	if err := h2.Answer("tok", wire.AskQuestion, "survivor", Reply{ClientID: "late"}); err != nil {
		t.Fatal(err)
	}
	if r := <-rc; r.ClientID != "late" || <-ec3 != nil {
		t.Fatalf("after restart: %+v", r)
	}
	r, err := h2.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "answered", Text: "q?", Timeout: time.Minute})
	if err != nil || r.Nickname != "laptop" || r.Contents[0].GetImage().GetData() != "AAAA" {
		t.Fatalf("answer kept across the restart: %+v %v", r, err)
	}
}

func TestClose(t *testing.T) {
	h := New(Options{})
	c := newFake("c")
	h.Join("tok", c, nil, Resume{})
	_, ec := ask(h, "tok", "r", time.Minute, context.Background())
	c.waitFor(t, wire.CmdAskQuestion)
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
	h.Join("tok", a, nil, Resume{})
	h.Join("tok", b, nil, Resume{})
	h.Join("other", x, nil, Resume{})
	st := a.waitFor(t, wire.CmdUserConnectionStatusNotification)
	if u := st.GetUserConnectionStatusNotification(); u.GetUser().GetClientId() != "b" || u.GetStatus() != "connected" {
		t.Errorf("status = %v", u)
	}
	if us := h.OnlineUsers("tok"); len(us) != 2 || us[0].GetClientId() != "a" || us[1].GetClientId() != "b" {
		t.Errorf("online users = %v", us)
	}
	if _, err := h.Chat("tok", a, "b", "hello"); err != nil {
		t.Fatal(err)
	}
	m := b.waitFor(t, wire.CmdChatMessageNotification).GetChatMessageNotification().GetChatMessage()
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
			if u := m.GetUserConnectionStatusNotification(); u.GetStatus() == "disconnected" && u.GetUser().GetClientId() == "b" {
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
	h.Join("tok", watcher, nil, Resume{})
	time.Sleep(60 * time.Millisecond)
	for i := range 40 {
		h.Join("tok", newFake(fmt.Sprint("c", i)), nil, Resume{})
	}
	m := watcher.waitFor(t, wire.CmdGetOnlineUsers)
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
	h.Join("tok", watcher, nil, Resume{})
	for i := range bigRoom + 10 {
		h.Join("tok", newFake(fmt.Sprint("c", i)), nil, Resume{})
	}
	time.Sleep(bigRoomDelay + 100*time.Millisecond)
	watcher.mu.Lock()
	before := len(watcher.got)
	watcher.mu.Unlock()
	for i := range 200 {
		h.Join("tok", newFake(fmt.Sprint("d", i)), nil, Resume{})
	}
	time.Sleep(bigRoomDelay + 100*time.Millisecond)
	watcher.mu.Lock()
	defer watcher.mu.Unlock()
	got := watcher.got[before:]
	if len(got) != 1 || got[0].GetUserConnectionStatusNotification().GetStatus() != wire.StatusChanged {
		t.Fatalf("200 arrivals in a big room gave the watcher %d frames: %v", len(got), got)
	}
}

func pendingOf(h *Hub, token string) []*pb.PendingMessage {
	ps, _ := h.PendingMessages(token)
	return ps
}

// TestSettledBounded: outcomes kept for re-attaching are dropped oldest
// first, by age and past the cap, without rescanning the rest.
func TestSettledBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	h := New(Options{Now: func() time.Time { return now }, Retention: time.Minute})
	r := h.room("tok")
	for i := range maxSettled + 10 {
		r.keepSettled(fmt.Sprint("s", i), &settled{at: now}, now.Add(-time.Minute))
	}
	if len(r.settled) != maxSettled || r.settled["s0"] != nil || r.settled[fmt.Sprint("s", maxSettled+9)] == nil {
		t.Fatalf("kept %d; s0 %v", len(r.settled), r.settled["s0"] != nil)
	}
	now = now.Add(2 * time.Minute)
	r.keepSettled("fresh", &settled{at: now}, now.Add(-time.Minute))
	if len(r.settled) != 1 || r.settled["fresh"] == nil || len(r.settledOrder) != 1 {
		t.Fatalf("after they aged: %d kept, order %d", len(r.settled), len(r.settledOrder))
	}
}

func TestReplayRingKeepsTheLastEvents(t *testing.T) {
	r := &room{}
	now := time.Now()
	total := replayEvents + 300
	for i := 1; i <= total; i++ {
		r.emitLocked([]*pb.WebsocketMessage{{Cmd: fmt.Sprint("e", i)}}, now)
	}
	oldest := uint64(total - replayEvents + 1)
	check := func(from uint64, want int) {
		t.Helper()
		got, ok := r.replayLocked(from, now)
		if !ok || len(got) != want {
			t.Fatalf("replay from %d: %d events, ok %v; want %d", from, len(got), ok, want)
		}
		for i, b := range got {
			var m pb.WebsocketMessage
			if err := proto.Unmarshal(b, &m); err != nil || m.Seq != from+uint64(i)+1 {
				t.Fatalf("replay from %d: event %d has seq %d", from, i, m.Seq)
			}
		}
	}
	check(oldest-1, replayEvents)
	check(uint64(total-5), 5)
	check(uint64(total), 0)
	if _, ok := r.replayLocked(oldest-2, now); ok {
		t.Fatal("an event that was overwritten was replayed")
	}
	if _, ok := r.replayLocked(oldest-1, now.Add(replayAge+time.Second)); ok {
		t.Fatal("events older than replayAge were replayed")
	}
}

func TestStoredRepliesKeepWhoAnswered(t *testing.T) {
	for _, rep := range []*Reply{
		{ClientID: "c1", Nickname: "phone", Meta: map[string]string{"k": "v"}, IsError: true,
			Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "yes"}}}},
		{ClientID: "c2"},
	} {
		got := decodeReply(encodeReply(rep))
		if got.ClientID != rep.ClientID || got.Nickname != rep.Nickname || got.IsError != rep.IsError ||
			fmt.Sprint(got.Meta) != fmt.Sprint(rep.Meta) || len(got.Contents) != len(rep.Contents) {
			t.Fatalf("decoded %+v, want %+v", got, rep)
		}
		for i := range rep.Contents {
			if !proto.Equal(got.Contents[i], rep.Contents[i]) {
				t.Fatalf("content %d: %v, want %v", i, got.Contents[i], rep.Contents[i])
			}
		}
		if rep.Meta != nil && len(rep.Meta) != 1 {
			t.Fatal("encoding changed the caller's map")
		}
	}
}

// TestReattachAfterRestartMustMatch: after a restart, a request restored
// pending or answered re-attaches only the same request; another one
// reusing its ID is refused, not attached to it or handed its answer.
func TestReattachAfterRestartMustMatch(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := New(Options{Store: db})
	asked := func(h *Hub, id, dir, text string, ctx context.Context) chan error {
		ec := make(chan error, 1)
		go func() {
			_, err := h.Ask(ctx, "tok", Request{Kind: wire.AskQuestion, ID: id, ProjectDirectory: dir, Text: text, Timeout: time.Minute})
			ec <- err
		}()
		return ec
	}
	ctx, cancel := context.WithCancel(context.Background())
	ec := asked(h, "waiting", "/p", "Merge it?", ctx)
	ec2 := asked(h, "done", "/p", "Ship it?", context.Background())
	for len(pendingOf(h, "tok")) < 2 {
		time.Sleep(time.Millisecond)
	}
	if err := h.Answer("tok", wire.AskQuestion, "done", Reply{ClientID: "pc", Nickname: "laptop"}); err != nil {
		t.Fatal(err)
	}
	<-ec2
	h.Close()
	cancel()
	<-ec
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h2 := New(Options{Store: db})
	if _, _, err := h2.Restore([]string{"tok"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, dir, text string }{
		{"waiting", "/p", "Drop the table?"},
		{"waiting", "/other", "Merge it?"},
		{"done", "/p", "Drop the table?"},
		{"done", "", "Ship it?"},
	} {
		select {
		case err := <-asked(h2, c.id, c.dir, c.text, context.Background()):
			if !errors.Is(err, ErrDuplicate) {
				t.Errorf("%s asked as %q in %q: %v, want ErrDuplicate", c.id, c.text, c.dir, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s asked as %q in %q: attached to the pending request", c.id, c.text, c.dir)
		}
	}
	r, err := h2.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "done", ProjectDirectory: "/p", Text: "Ship it?", Timeout: time.Minute})
	if err != nil || r.Nickname != "laptop" {
		t.Fatalf("the same request after the restart: %+v %v", r, err)
	}
	ec3 := asked(h2, "waiting", "/p", "Merge it?", context.Background())
	for len(pendingOf(h2, "tok")) != 1 {
		time.Sleep(time.Millisecond)
	}
	if err := h2.Answer("tok", wire.AskQuestion, "waiting", Reply{ClientID: "late"}); err != nil || <-ec3 != nil {
		t.Fatalf("the same pending request after the restart: %v", err)
	}
}

// TestAgentNamesKept: the agent's, model's and MCP client's names travel
// with a request through the store, a restart and the history.
func TestAgentNamesKept(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := New(Options{Store: db})
	req := Request{Kind: wire.TaskFinish, ID: "named", Text: "Done.", Timeout: time.Minute,
		AgentName: "Claude Code", ReasoningModelName: "claude-opus-4", McpClientName: "claude-code"}
	ctx, cancel := context.WithCancel(context.Background())
	ec := make(chan error, 1)
	go func() { _, err := h.Ask(ctx, "tok", req); ec <- err }()
	for len(pendingOf(h, "tok")) == 0 {
		time.Sleep(time.Millisecond)
	}
	h.Close()
	cancel()
	<-ec
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h2 := New(Options{Store: db})
	if _, _, err := h2.Restore([]string{"tok"}); err != nil {
		t.Fatal(err)
	}
	named := func(what string, r *pb.McpTaskFinishRequest) {
		t.Helper()
		if r.GetAgentName() != req.AgentName || r.GetReasoningModelName() != req.ReasoningModelName || r.GetMcpClientName() != req.McpClientName {
			t.Errorf("%s: %v", what, r)
		}
	}
	ps := pendingOf(h2, "tok")
	if len(ps) != 2 {
		t.Fatalf("pending after restart = %v, want the task report under both names", ps)
	}
	for _, p := range ps {
		named("pending "+p.GetMessageType(), p.GetTaskFinishRequest().GetRequest())
	}
	if err := h2.Answer("tok", wire.TaskFinish, "named", Reply{ClientID: "pc"}); err != nil {
		t.Fatal(err)
	}
	items, _, err := h2.History("tok", time.Now().Add(time.Minute), 10)
	if err != nil || len(items) != 1 {
		t.Fatalf("history = %v, %v", items, err)
	}
	named("history", items[0].GetTaskFinishRequest().GetRequest())
}
