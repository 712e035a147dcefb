package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
	"github.com/agentassistant/agentassistant/srv/store"
)

const tok = "cluster-token-0123456789"

// client is a /ws client as the hub sees it, collecting its frames.
type client struct {
	id     string
	frames chan *pb.WebsocketMessage
}

func newClient(id string) *client {
	return &client{id: id, frames: make(chan *pb.WebsocketMessage, 1024)}
}

func (c *client) ID() string             { return c.id }
func (c *client) Nickname() string       { return "nick-" + c.id }
func (c *client) ConnectedAt() time.Time { return time.Unix(0, 0) }
func (c *client) Send(n *hub.Note) bool {
	for _, b := range n.Encoded(wsFrames) {
		var m pb.WebsocketMessage
		if err := proto.Unmarshal(b, &m); err != nil {
			panic(err)
		}
		c.frames <- &m
	}
	return true
}

// wsFrames is the /ws door's encoding of a note, marshalled.
func wsFrames(n *hub.Note) [][]byte {
	var out [][]byte
	for _, m := range inbox.Messages(n) {
		b, err := proto.Marshal(m)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return out
}

// expect waits for the next frame of cmd, skipping presence.
func (c *client) expect(t *testing.T, cmd string) *pb.WebsocketMessage {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-c.frames:
			if m.Cmd == cmd {
				return m
			}
			if m.Cmd != wire.CmdUserConnectionStatusNotification && m.Cmd != wire.CmdGetOnlineUsers {
				t.Fatalf("%s: got %s while waiting for %s", c.id, m.Cmd, cmd)
			}
		case <-deadline:
			t.Fatalf("%s: no %s", c.id, cmd)
		}
	}
}

type instance struct {
	hub *hub.Hub
	c   *Cluster
}

func start(t *testing.T, url, name string) *instance {
	t.Helper()
	return startWith(t, url, name, hub.Options{OrphanNotice: time.Hour})
}

func startWith(t *testing.T, url, name string, o hub.Options) *instance {
	t.Helper()
	c, err := Open(context.Background(), Options{URL: url, Tokens: []string{tok}, Instance: name, Heartbeat: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	o.Shared, o.Instance = c, name
	h := hub.New(o)
	if err := c.Start(h, func() int { n, _ := h.Status(tok); return n }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(); c.Close() })
	select {
	case <-c.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("cluster never ready")
	}
	return &instance{hub: h, c: c}
}

func question(id, text string) hub.Request {
	return hub.Request{Kind: wire.AskQuestion, ID: id, ProjectDirectory: "/src", Text: text, Timeout: time.Minute}
}

func reply(who, text string) hub.Reply {
	return hub.Reply{ClientID: who, Nickname: "nick-" + who, Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: text}}}}
}

func text(r *hub.Reply) string { return r.Contents[0].GetText().GetText() }

type result struct {
	rep *hub.Reply
	err error
}

func ask(ctx context.Context, in *instance, req hub.Request) chan result {
	done := make(chan result, 1)
	go func() {
		rep, err := in.hub.Ask(ctx, tok, req)
		done <- result{rep, err}
	}()
	return done
}

func wait(t *testing.T, done chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Ask did not return")
		return result{}
	}
}

// TestAskAcrossInstances: a question asked through A reaches the devices
// on B and C; the answer given on C returns to A's caller, and the others
// are told.
func TestAskAcrossInstances(t *testing.T) {
	ns := natstest.Start(t)
	a, b, c := start(t, ns.URL(), "a"), start(t, ns.URL(), "b"), start(t, ns.URL(), "c")
	onA, onB, onC := newClient("pa"), newClient("pb"), newClient("pc")
	a.hub.Join(tok, onA, nil, hub.Resume{})
	b.hub.Join(tok, onB, nil, hub.Resume{})
	c.hub.Join(tok, onC, nil, hub.Resume{})

	done := ask(context.Background(), a, question("q1", "Which database?"))
	for _, cl := range []*client{onA, onB, onC} {
		if q := cl.expect(t, wire.CmdAskQuestion).GetAskQuestionRequest(); q.GetID() != "q1" || q.GetRequest().GetQuestion() != "Which database?" {
			t.Fatalf("%s got %v", cl.id, q)
		}
	}
	byTelegram := reply("pc", "PostgreSQL")
	byTelegram.Door = "telegram"
	if err := c.hub.Answer(context.Background(), tok, wire.AskQuestion, "q1", byTelegram); err != nil {
		t.Fatal(err)
	}
	r := wait(t, done)
	if r.err != nil || text(r.rep) != "PostgreSQL" || r.rep.ClientID != "pc" {
		t.Fatalf("Ask = %+v, %v", r.rep, r.err)
	}
	// Told elsewhere (a channel's follow-up), the answer names its way.
	if o, ok := a.hub.Outcome(tok, "q1"); !ok || o.Reply == nil || o.Reply.Door != "telegram" {
		t.Errorf("A knows the outcome %+v (%v), want one answered on Telegram", o.Reply, ok)
	}
	for _, cl := range []*client{onA, onB} {
		n := cl.expect(t, wire.CmdAskQuestionReplyNotification)
		if n.GetAskQuestionResponse().GetContents()[0].GetText().GetText() != "PostgreSQL" {
			t.Fatalf("%s notified %v", cl.id, n)
		}
	}
	if err := b.hub.Answer(context.Background(), tok, wire.AskQuestion, "q1", reply("pb", "late")); !errors.Is(err, hub.ErrNotPending) {
		t.Fatalf("a late answer on B: %v", err)
	}
}

// TestFirstReplyWinsAcrossInstances: two answers given at the same moment
// on two instances: exactly one wins, the other is told, and the caller
// gets the winner's, in every trial.
func TestFirstReplyWinsAcrossInstances(t *testing.T) {
	ns := natstest.Start(t)
	a, b, c := start(t, ns.URL(), "a"), start(t, ns.URL(), "b"), start(t, ns.URL(), "c")
	onB, onC := newClient("pb"), newClient("pc")
	b.hub.Join(tok, onB, nil, hub.Resume{})
	c.hub.Join(tok, onC, nil, hub.Resume{})
	for i := range 50 {
		id := fmt.Sprintf("race-%d", i)
		done := ask(context.Background(), a, question(id, "Race?"))
		onB.expect(t, wire.CmdAskQuestion)
		onC.expect(t, wire.CmdAskQuestion)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, in := range []*instance{b, c} {
			who := []*client{onB, onC}[j].id
			wg.Go(func() {
				errs[j] = in.hub.Answer(context.Background(), tok, wire.AskQuestion, id, reply(who, fmt.Sprint("from ", j)))
			})
		}
		wg.Wait()
		winners := 0
		winner := -1
		for j, err := range errs {
			switch {
			case err == nil:
				winners++
				winner = j
			case !errors.Is(err, hub.ErrNotPending):
				t.Fatalf("trial %d: answer %d: %v", i, j, err)
			}
		}
		if winners != 1 {
			t.Fatalf("trial %d: %d answers won (%v)", i, winners, errs)
		}
		r := wait(t, done)
		if r.err != nil || text(r.rep) != fmt.Sprint("from ", winner) {
			t.Fatalf("trial %d: Ask = %+v, %v; winner %d", i, r.rep, r.err, winner)
		}
		// The loser's instance tells its device whose answer won.
		loser := []*client{onB, onC}[1-winner]
		if n := loser.expect(t, wire.CmdAskQuestionReplyNotification); n.GetAskQuestionResponse().GetContents()[0].GetText().GetText() != fmt.Sprint("from ", winner) {
			t.Fatalf("trial %d: loser told %v", i, n)
		}
	}
}

// TestReattachOnAnotherInstance: the agent's call through A goes away; it
// comes back by the request's ID through B and gets the answer given on
// C; once settled, a re-attach through any instance gets the outcome.
func TestReattachOnAnotherInstance(t *testing.T) {
	ns := natstest.Start(t)
	a, b, c := start(t, ns.URL(), "a"), start(t, ns.URL(), "b"), start(t, ns.URL(), "c")
	onC := newClient("pc")
	c.hub.Join(tok, onC, nil, hub.Resume{})
	ctx, cancel := context.WithCancel(context.Background())
	first := ask(ctx, a, question("q", "Still there?"))
	onC.expect(t, wire.CmdAskQuestion)
	cancel()
	if r := wait(t, first); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("first call: %v", r.err)
	}
	second := ask(context.Background(), b, question("q", "Still there?"))
	if err := c.hub.Answer(context.Background(), tok, wire.AskQuestion, "q", reply("pc", "yes")); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, second); r.err != nil || text(r.rep) != "yes" {
		t.Fatalf("re-attached call = %+v, %v", r.rep, r.err)
	}
	// Another request under that ID is refused wherever it is asked.
	if _, err := c.hub.Ask(context.Background(), tok, question("q", "Something else?")); !errors.Is(err, hub.ErrDuplicate) {
		t.Fatalf("another request with the ID: %v", err)
	}
	if r := wait(t, ask(context.Background(), a, question("q", "Still there?"))); r.err != nil || text(r.rep) != "yes" {
		t.Fatalf("re-attach after the answer = %+v, %v", r.rep, r.err)
	}
}

// TestDeadlineOnceAcrossInstances: every instance arms the deadline; only
// one timeout is written, and every device hears of it once.
func TestDeadlineOnceAcrossInstances(t *testing.T) {
	ns := natstest.Start(t)
	a, b, c := start(t, ns.URL(), "a"), start(t, ns.URL(), "b"), start(t, ns.URL(), "c")
	watch, err := a.c.reqs.WatchAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop()
	var clients []*client
	for i, in := range []*instance{a, b, c} {
		cl := newClient(fmt.Sprint("p", i))
		in.hub.Join(tok, cl, nil, hub.Resume{})
		clients = append(clients, cl)
	}
	req := question("d", "Quick?")
	req.Timeout = time.Second // records keep whole seconds
	if r := wait(t, ask(context.Background(), a, req)); !errors.Is(r.err, hub.ErrTimeout) {
		t.Fatalf("Ask = %v", r.err)
	}
	for _, cl := range clients {
		cl.expect(t, wire.CmdAskQuestion)
		if n := cl.expect(t, wire.CmdRequestCancelled); n.GetRequestCancelledNotification().GetReason() != "timeout" {
			t.Fatalf("%s: %v", cl.id, n)
		}
	}
	// A fourth instance's write, after the others have all fired, marks
	// the end of what they wrote.
	var writes []string
	marker := key("end", "end")
	if _, err := a.c.reqs.Put(context.Background(), marker, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	for e := range watch.Updates() {
		if e == nil {
			continue
		}
		if e.Key() == marker {
			break
		}
		rec, err := decode(e.Value())
		if err != nil {
			t.Fatal(err)
		}
		writes = append(writes, rec.Status)
	}
	if fmt.Sprint(writes) != "[pending timeout]" {
		t.Fatalf("writes = %v, want one pending and one timeout", writes)
	}
	for _, cl := range clients {
		select {
		case m := <-cl.frames:
			if m.Cmd == wire.CmdRequestCancelled {
				t.Fatalf("%s told twice", cl.id)
			}
		default:
		}
	}
}

// Every test of the package checks the hub's lock order.
func TestMain(m *testing.M) { lockorder.Main(m) }

// TestNoTokenInNATS: what the cluster writes to JetStream names a room by
// its digest, never by its token.
func TestNoTokenInNATS(t *testing.T) {
	ns := natstest.Start(t)
	a := start(t, ns.URL(), "a")
	onA := newClient("pa")
	a.hub.Join(tok, onA, nil, hub.Resume{})
	done := ask(context.Background(), a, question("q", "Token?"))
	onA.expect(t, wire.CmdAskQuestion)
	if err := a.hub.Answer(context.Background(), tok, wire.AskQuestion, "q", reply("pa", "no")); err != nil {
		t.Fatal(err)
	}
	wait(t, done)
	a.hub.Join(tok, newClient("abcd"), nil, hub.Resume{})
	eventually(t, "a device's presence written", func() bool {
		_, err := a.c.roster.kv.Get(context.Background(), presenceKey(store.Room(tok), "a", "abcd"))
		return err == nil
	})
	for _, kv := range []interface {
		ListKeys(context.Context, ...jetstream.WatchOpt) (jetstream.KeyLister, error)
		Get(context.Context, string) (jetstream.KeyValueEntry, error)
	}{a.c.reqs, a.c.insts, a.c.roster.kv} {
		l, err := kv.ListKeys(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for k := range l.Keys() {
			e, err := kv.Get(context.Background(), k)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(k, tok) || strings.Contains(string(e.Value()), tok) {
				t.Fatalf("%s holds the token: %s", k, e.Value())
			}
			n++
		}
		if n == 0 {
			t.Fatal("nothing written")
		}
	}
}

// TestOrphanAcrossInstances: the agent's call goes away from A, the
// holder: every device is told no agent waits; the agent comes back
// through B, which holds the call from then on: the devices are told it is
// back, and A's orphan grace passing withdraws nothing. Once the call
// goes away from B too and nobody comes back, B's grace withdraws it
// everywhere.
func TestOrphanAcrossInstances(t *testing.T) {
	ns := natstest.Start(t)
	short := hub.Options{OrphanNotice: 50 * time.Millisecond, OrphanGrace: 300 * time.Millisecond}
	a, b := startWith(t, ns.URL(), "a", short), startWith(t, ns.URL(), "b", short)
	onA, onB := newClient("pa"), newClient("pb")
	a.hub.Join(tok, onA, nil, hub.Resume{})
	b.hub.Join(tok, onB, nil, hub.Resume{})
	ctx, cancel := context.WithCancel(context.Background())
	first := ask(ctx, a, question("o", "Anyone?"))
	onA.expect(t, wire.CmdAskQuestion)
	onB.expect(t, wire.CmdAskQuestion)
	cancel()
	wait(t, first)
	for _, cl := range []*client{onA, onB} {
		if n := cl.expect(t, wire.CmdRequestAgentStatus); !n.GetRequestAgentStatusNotification().GetAgentGone() {
			t.Fatalf("%s: %v", cl.id, n)
		}
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	second := ask(ctx2, b, question("o", "Anyone?"))
	for _, cl := range []*client{onA, onB} {
		if n := cl.expect(t, wire.CmdRequestAgentStatus); n.GetRequestAgentStatusNotification().GetAgentGone() {
			t.Fatalf("%s: %v", cl.id, n)
		}
	}
	time.Sleep(600 * time.Millisecond) // A's grace would have fired by now
	select {
	case m := <-onA.frames:
		t.Fatalf("while the agent waits through B: %s %v", m.Cmd, m)
	default:
	}
	cancel2()
	wait(t, second)
	for _, cl := range []*client{onA, onB} {
		cl.expect(t, wire.CmdRequestAgentStatus)
		if n := cl.expect(t, wire.CmdRequestCancelled); n.GetRequestCancelledNotification().GetReason() != "abandoned" {
			t.Fatalf("%s: %v", cl.id, n)
		}
	}
}

// TestUnreachableNATSIsNamed: a NATS that cannot be reached is named in
// the error, without its password.
func TestUnreachableNATSIsNamed(t *testing.T) {
	_, err := Open(context.Background(), Options{URL: "nats://me:secret@127.0.0.1:1", Tokens: []string{tok}, Instance: "x"})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("error = %v", err)
	}
}

// TestGetOfNoRecord: a request record that is not in the bucket is
// hub.ErrRecordMissing, not an error NATS gave: the hub tells a record
// being written elsewhere, not yet readable, from a store it cannot use.
func TestGetOfNoRecord(t *testing.T) {
	ns := natstest.Start(t)
	a := start(t, ns.URL(), "a")
	_, _, err := a.c.Get(context.Background(), "room", "never-asked")
	if !errors.Is(err, hub.ErrRecordMissing) || errors.Is(err, hub.ErrUnreachable) {
		t.Fatalf("Get of no record: %v, want hub.ErrRecordMissing", err)
	}
}
