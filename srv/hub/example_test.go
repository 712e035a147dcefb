package hub_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// screen is a device logged in to a room, as the hub sees it: /ws's
// connection in the server, which encodes what it is told in its wire.
// It keeps the notes it is sent for the example to read.
type screen struct {
	id, nickname string
	notes        chan *hub.Note
}

func newScreen(id, nickname string) *screen {
	return &screen{id: id, nickname: nickname, notes: make(chan *hub.Note, 64)}
}

func (s *screen) ID() string             { return s.id }
func (s *screen) Nickname() string       { return s.nickname }
func (s *screen) ConnectedAt() time.Time { return time.Time{} }

// Send must not block: a real connection queues the note's frames, and
// drops a client too slow to keep up.
func (s *screen) Send(n *hub.Note) bool {
	select {
	case s.notes <- n:
		return true
	default:
		return false
	}
}

// next is the next note of kind the screen was sent, skipping the others
// (presence, say).
func (s *screen) next(kind hub.NoteKind) *hub.Note {
	for n := range s.notes {
		if n.Kind == kind {
			return n
		}
	}
	return nil
}

// An agent asks a question of the devices logged in under its token,
// and a person answers on one of them. Ask waits for the answer: it is
// what the RPC handler returns to the agent.
func Example() {
	h := hub.New(hub.Options{}) // no Store: requests are kept in memory
	defer h.Close()
	phone := newScreen("c-1", "phone")
	h.Join("token", phone, nil, hub.Resume{})

	replies := make(chan *hub.Reply, 1)
	go func() {
		rep, err := h.Ask(context.Background(), "token", hub.Request{
			Kind: wire.AskQuestion, ID: "q-1", ProjectDirectory: "/src/app",
			Text: "Deploy to production?", Timeout: time.Hour,
		})
		if err != nil {
			fmt.Println("ask:", err)
		}
		replies <- rep
	}()

	q := phone.next(hub.NoteAsked).Request
	fmt.Printf("the phone shows %s from %s: %s\n", q.ID, q.ProjectDirectory, q.Text)

	err := h.Answer(context.Background(), "token", wire.AskQuestion, "q-1", hub.Reply{
		ClientID: phone.ID(), Nickname: phone.Nickname(),
		Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Yes, go ahead."}}},
	})
	if err != nil {
		fmt.Println("answer:", err)
	}
	rep := <-replies
	fmt.Printf("the agent hears from %s: %s\n", rep.Nickname, rep.Contents[0].GetText().GetText())

	// The first answer wins; a second one finds nothing to answer.
	err = h.Answer(context.Background(), "token", wire.AskQuestion, "q-1", hub.Reply{ClientID: phone.ID(), Nickname: phone.Nickname()})
	fmt.Println("a second answer:", errors.Is(err, hub.ErrNotPending))
	// Output:
	// the phone shows q-1 from /src/app: Deploy to production?
	// the agent hears from phone: Yes, go ahead.
	// a second answer: true
}

// The agent withdraws its question: its call ends with ErrWithdrawn, and
// every device is told, so the question leaves their screens.
func ExampleHub_Cancel() {
	h := hub.New(hub.Options{})
	defer h.Close()
	phone := newScreen("c-1", "phone")
	h.Join("token", phone, nil, hub.Resume{})

	asked := make(chan error, 1)
	go func() {
		_, err := h.Ask(context.Background(), "token", hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?", Timeout: time.Hour})
		asked <- err
	}()
	phone.next(hub.NoteAsked)

	if err := h.Cancel(context.Background(), "token", "q-1"); err != nil {
		fmt.Println("cancel:", err)
	}
	fmt.Println("the agent's call:", <-asked)
	n := phone.next(hub.NoteClosed)
	fmt.Println("the phone is told:", n.Request.ID, n.Reason)
	// Output:
	// the agent's call: the request was withdrawn before anyone answered
	// the phone is told: q-1 cancelled
}

// Whoever is not a room's device (metrics, push notifications, channels)
// hears what happens to requests as typed events, without a wire format.
func ExampleHub_Subscribe() {
	h := hub.New(hub.Options{})
	defer h.Close()
	events := make(chan hub.Event, 8)
	stop := h.Subscribe(func(e hub.Event) { events <- e }) // must not block
	defer stop()

	go func() {
		_, _ = h.Ask(context.Background(), "token", hub.Request{Kind: wire.TaskFinish, ID: "t-1", Text: "Tests pass.", Timeout: time.Hour})
	}()
	e := <-events
	fmt.Println(e.Kind, e.Request.Kind, e.Request.ID)

	if err := h.Answer(context.Background(), "token", wire.TaskFinish, "t-1", hub.Reply{ClientID: "c-1", Nickname: "laptop"}); err != nil {
		fmt.Println("answer:", err)
	}
	e = <-events
	fmt.Println(e.Kind, "by", e.Reply.Nickname)
	// Output:
	// asked TaskFinish t-1
	// answered by laptop
}
