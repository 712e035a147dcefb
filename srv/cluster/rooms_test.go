package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// online lists the client IDs of in's online list.
func online(in *instance) []string {
	var ids []string
	for _, u := range in.hub.OnlineUsers(tok) {
		ids = append(ids, u.ID)
	}
	slices.Sort(ids)
	return ids
}

// eventually waits until cond holds, failing after a generous bound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// presenceOf waits for c's next presence notification about who.
func presenceOf(t *testing.T, c *client, who string) string {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case m := <-c.frames:
			n := m.GetUserConnectionStatusNotification()
			if m.Cmd == wire.CmdUserConnectionStatusNotification && n.GetUser().GetClientId() == who {
				return n.GetStatus()
			}
		case <-deadline:
			t.Fatalf("%s: no presence notification about %s", c.id, who)
			return ""
		}
	}
}

// TestPresenceAcrossInstances: a device on A is in B's online list and
// B's devices are told when it comes and goes; and the other way round.
func TestPresenceAcrossInstances(t *testing.T) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	onB := newClient("b0b0")
	b.hub.Join(tok, onB, nil, hub.Resume{})
	onA := newClient("a0a0")
	a.hub.Join(tok, onA, nil, hub.Resume{})
	if s := presenceOf(t, onB, "a0a0"); s != wire.StatusConnected {
		t.Fatalf("B's device was told %q of A's", s)
	}
	eventually(t, "both devices in both lists", func() bool {
		return slices.Equal(online(a), []string{"a0a0", "b0b0"}) && slices.Equal(online(b), []string{"a0a0", "b0b0"})
	})
	a.hub.Leave(tok, onA)
	if s := presenceOf(t, onB, "a0a0"); s != wire.StatusDisconnected {
		t.Fatalf("B's device was told %q of A's leaving", s)
	}
	if got := online(b); !slices.Equal(got, []string{"b0b0"}) {
		t.Fatalf("B's list after A's device left: %v", got)
	}
}

// TestChatAcrossInstances: a chat line and a remote-input backspace from
// a device on A reach a device on B; a line to a device that left is
// refused.
func TestChatAcrossInstances(t *testing.T) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	onA, onB := newClient("a1a1"), newClient("b1b1")
	a.hub.Join(tok, onA, nil, hub.Resume{})
	b.hub.Join(tok, onB, nil, hub.Resume{})
	eventually(t, "B's device in A's list", func() bool { return slices.Contains(online(a), "b1b1") })
	msg, err := a.hub.Chat(tok, onA, "b1b1", "hello from A")
	if err != nil {
		t.Fatal(err)
	}
	got := onB.expect(t, wire.CmdChatMessageNotification).GetChatMessageNotification().GetChatMessage()
	if got.GetContent() != "hello from A" || got.GetSenderClientId() != "a1a1" || got.GetMessageId() != msg.ID ||
		got.GetReceiverNickname() != "nick-b1b1" {
		t.Fatalf("B's device got %v", got)
	}
	if err := a.hub.Backspace(tok, onA, "b1b1"); err != nil {
		t.Fatal(err)
	}
	if m := onB.expect(t, wire.CmdSendBackspace); m.GetStrParam() != "a1a1" {
		t.Fatalf("backspace = %v", m)
	}
	// B's device leaves; until A hears of it, the line reaches B, which
	// has no such client: refused either way.
	b.hub.Leave(tok, onB)
	if _, err := a.hub.Chat(tok, onA, "b1b1", "still there?"); !errors.Is(err, hub.ErrNoReceiver) {
		t.Fatalf("chat to a device gone: %v", err)
	}
}

// TestPresenceInstanceDies: an instance that stops without a word (its
// goroutines and connection gone, nothing deleted) has its devices drop
// out of the others' lists once its heartbeat expires, with a
// disconnected notice.
func TestPresenceInstanceDies(t *testing.T) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	onA, onB := newClient("a2a2"), newClient("b2b2")
	a.hub.Join(tok, onA, nil, hub.Resume{})
	b.hub.Join(tok, onB, nil, hub.Resume{})
	if s := presenceOf(t, onB, "a2a2"); s != wire.StatusConnected {
		t.Fatalf("status %q", s)
	}
	a.c.die()
	if s := presenceOf(t, onB, "a2a2"); s != wire.StatusDisconnected {
		t.Fatalf("status %q", s)
	}
	if got := online(b); !slices.Equal(got, []string{"b2b2"}) {
		t.Fatalf("B's list after A died: %v", got)
	}
	if _, err := b.hub.Chat(tok, onB, "a2a2", "hello?"); !errors.Is(err, hub.ErrNoReceiver) {
		t.Fatalf("chat to a dead instance's device: %v", err)
	}
}

// die stops c as a kill -9 would: no goodbye to NATS.
func (c *Cluster) die() {
	c.closing.Do(func() {
		c.stop()
		c.wg.Wait()
		c.nc.Close()
	})
}

// TestReplayOnAnotherInstance: a device that saw events on A and comes
// back on B gets what it missed meanwhile from B, in order, each once,
// under the numbers A gave them; the epoch means the same on both.
func TestReplayOnAnotherInstance(t *testing.T) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	if a.hub.Epoch() != b.hub.Epoch() {
		t.Fatalf("epochs differ: %q, %q", a.hub.Epoch(), b.hub.Epoch())
	}
	phone, other := newClient("c3c3"), newClient("d3d3")
	a.hub.Join(tok, phone, nil, hub.Resume{})
	b.hub.Join(tok, other, nil, hub.Resume{})
	first := ask(context.Background(), a, question("q1", "First?"))
	seen := phone.expect(t, wire.CmdAskQuestion).GetSeq()
	other.expect(t, wire.CmdAskQuestion)
	a.hub.Leave(tok, phone) // the phone's connection drops

	// Meanwhile: q1 answered on B, q2 asked through B.
	if err := b.hub.Answer(context.Background(), tok, wire.AskQuestion, "q1", reply("d3d3", "yes")); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, first); r.err != nil || text(r.rep) != "yes" {
		t.Fatalf("q1: %v", r.err)
	}
	ask(context.Background(), b, question("q2", "Second?"))
	other.expect(t, wire.CmdAskQuestion)

	// The phone comes back on B.
	back := newClient("c4c4")
	var resumed bool
	b.hub.Join(tok, back, func(r bool) {
		resumed = r
		back.frames <- &pb.WebsocketMessage{Cmd: wire.CmdUserLogin}
	}, hub.Resume{Epoch: a.hub.Epoch(), From: seen})
	if !resumed {
		t.Fatal("not resumed on B")
	}
	back.expect(t, wire.CmdUserLogin)
	n := back.expect(t, wire.CmdAskQuestionReplyNotification)
	q := back.expect(t, wire.CmdAskQuestion)
	if n.GetAskQuestionRequest().GetID() != "q1" || q.GetAskQuestionRequest().GetID() != "q2" || seen >= n.GetSeq() || n.GetSeq() >= q.GetSeq() {
		t.Fatalf("replayed %v (seq %d) then %v (seq %d) after %d", n.GetAskQuestionRequest().GetID(), n.GetSeq(), q.GetAskQuestionRequest().GetID(), q.GetSeq(), seen)
	}
	select {
	case m := <-back.frames:
		if m.Cmd != wire.CmdUserConnectionStatusNotification {
			t.Fatalf("replayed more: %s", m.Cmd)
		}
	default:
	}
	// Numbers are the cluster's: B's frames of q2 carry A's numbers too.
	if err := b.hub.Cancel(context.Background(), tok, "q2"); err != nil {
		t.Fatal(err)
	}
	c1 := back.expect(t, wire.CmdRequestCancelled)
	if c1.GetSeq() <= q.GetSeq() {
		t.Fatalf("cancel numbered %d after %d", c1.GetSeq(), q.GetSeq())
	}
}

func mustMarshal(m *pb.WebsocketMessage) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// TestMissedFromAnyInstance: an answer given on B while the agent that
// asked through A is away is kept on every instance; the next call of the
// project takes it through C, once cluster-wide: A has nothing left to
// hand over, and a re-attach by ID is told it went to another call.
func TestMissedFromAnyInstance(t *testing.T) {
	ns := natstest.Start(t)
	o := hub.Options{OrphanNotice: 20 * time.Millisecond, OrphanGrace: time.Hour}
	a, b, c := startWith(t, ns.URL(), "a", o), startWith(t, ns.URL(), "b", o), startWith(t, ns.URL(), "c", o)
	onB := newClient("b5b5")
	b.hub.Join(tok, onB, nil, hub.Resume{})
	ctx, cancel := context.WithCancel(context.Background())
	gone := ask(ctx, a, question("away", "While you are away?"))
	onB.expect(t, wire.CmdAskQuestion)
	cancel() // the agent's call goes away
	wait(t, gone)
	if n := onB.expect(t, wire.CmdRequestAgentStatus).GetRequestAgentStatusNotification(); !n.GetAgentGone() {
		t.Fatalf("agent status %v", n)
	}
	if err := b.hub.Answer(context.Background(), tok, wire.AskQuestion, "away", reply("b5b5", "kept")); err != nil {
		t.Fatal(err)
	}
	var got []hub.Missed
	eventually(t, "C takes the kept answer", func() bool {
		got = c.hub.TakeMissed(tok, "/src", nil, 0)
		return len(got) > 0
	})
	if len(got) != 1 || got[0].ID != "away" || text(got[0].Reply) != "kept" {
		t.Fatalf("C took %+v", got)
	}
	eventually(t, "A hears it was taken", func() bool { return len(a.hub.TakeMissed(tok, "/src", nil, 0)) == 0 })
	if again := b.hub.TakeMissed(tok, "/src", nil, 0); len(again) != 0 {
		t.Fatalf("B handed it over again: %+v", again)
	}
	if _, err := b.hub.Ask(context.Background(), tok, question("away", "While you are away?")); !errors.Is(err, hub.ErrHandedOver) {
		t.Fatalf("re-attach by ID after the hand-over: %v", err)
	}
}

// TestDeliveryTakesOnlyChat: what another instance (or anyone publishing
// to NATS) hands over for a client here is queued only as a chat line or
// a remote-input key (a hub.Line, which the client's door encodes), and
// only into a room of this deployment: a frame of the client's wire
// (an older instance's delivery) is not passed on.
func TestDeliveryTakesOnlyChat(t *testing.T) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	onB := newClient("b6b6")
	b.hub.Join(tok, onB, nil, hub.Resume{})
	room := store.Room(tok)
	ctx := context.Background()
	raw := func(data []byte) string {
		t.Helper()
		m, err := a.c.nc.RequestWithContext(ctx, deliverSubject("b"), data)
		if err != nil {
			t.Fatal(err)
		}
		return string(m.Data)
	}
	forged, err := json.Marshal(map[string]any{"room": room, "to": "b6b6", "frame": mustMarshal(&pb.WebsocketMessage{Cmd: wire.CmdAskQuestion, AskQuestionRequest: &pb.AskQuestionRequest{ID: "forged"}})})
	if err != nil {
		t.Fatal(err)
	}
	if got := raw(forged); got == "" {
		t.Fatal("a forged question was delivered")
	}
	if got := raw([]byte("not json \xff")); got == "" {
		t.Fatal("garbage was delivered")
	}
	line := hub.Line{ID: "l1", From: hub.User{ID: "a6a6", Nickname: "nick-a6a6"}, To: hub.User{ID: "b6b6", Nickname: "nick-b6b6"}, Content: "hi"}
	if err := a.c.Deliver(ctx, "b", store.Room("another-deployment-token"), line); !errors.Is(err, hub.ErrNoReceiver) {
		t.Fatalf("a line into another room: %v", err)
	}
	if err := a.c.Deliver(ctx, "b", room, line); err != nil {
		t.Fatal(err)
	}
	if m := onB.expect(t, wire.CmdChatMessageNotification).GetChatMessageNotification().GetChatMessage(); m.GetMessageId() != "l1" || m.GetContent() != "hi" {
		t.Fatalf("the line came as %v", m)
	}
	select {
	case m := <-onB.frames:
		if m.Cmd == wire.CmdAskQuestion {
			t.Fatal("the forged question reached the device")
		}
	default:
	}
}

// busyClient is a device whose send queue has no room for chat (its
// door's Offer refuses a line once half its queue waits to be read).
type busyClient struct{ *client }

func (c busyClient) Send(n *hub.Note) bool {
	if n.Kind == hub.NoteLine {
		return false
	}
	return c.client.Send(n)
}

// TestChatToABusyDeviceAcrossInstances: a device on B that has not read
// what it was sent refuses a chat line rather than be dropped as too
// slow; its sender on A is told it is busy, as on one server, not that
// it is offline (it is there, and a retry may reach it).
func TestChatToABusyDeviceAcrossInstances(t *testing.T) {
	ns := natstest.Start(t)
	a, b := start(t, ns.URL(), "a"), start(t, ns.URL(), "b")
	onA, onB := newClient("a3a3"), busyClient{newClient("b3b3")}
	a.hub.Join(tok, onA, nil, hub.Resume{})
	b.hub.Join(tok, onB, nil, hub.Resume{})
	eventually(t, "B's device in A's list", func() bool { return slices.Contains(online(a), "b3b3") })
	if _, err := a.hub.Chat(tok, onA, "b3b3", "hello from A"); !errors.Is(err, hub.ErrReceiverBusy) {
		t.Fatalf("chat to a busy device on another instance: %v, want %v", err, hub.ErrReceiverBusy)
	}
	if err := a.hub.Backspace(tok, onA, "b3b3"); !errors.Is(err, hub.ErrReceiverBusy) {
		t.Fatalf("backspace to a busy device on another instance: %v, want %v", err, hub.ErrReceiverBusy)
	}
}
