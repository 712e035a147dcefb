package hub

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// askIn asks id from project in the background; cancel stands for the
// agent's call going away (a dropped connection looks the same).
func askIn(h *Hub, id, project string) (cancel context.CancelFunc, reply chan *Reply) {
	ctx, cancel := context.WithCancel(context.Background())
	reply = make(chan *Reply, 1)
	go func() {
		r, _ := h.Ask(ctx, "tok", Request{Kind: wire.AskQuestion, ID: id, ProjectDirectory: project, Text: "q " + id + "?", Timeout: time.Hour})
		reply <- r
	}()
	return cancel, reply
}

// answeredAway asks id from the project /p, has the agent's call go
// away, and answers rep: kept for the project's next call.
func answeredAway(t *testing.T, h *Hub, id string, rep Reply) {
	t.Helper()
	cancel, _ := askIn(h, id, "/p")
	synctest.Wait()
	cancel()
	synctest.Wait()
	if err := h.Answer(context.Background(), "tok", wire.AskQuestion, id, rep); err != nil {
		t.Fatal(err)
	}
}

// agentStatus lists the agent-status notes c got of id, as gone flags.
func agentStatus(c *fakeClient, id string) []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []bool
	for _, m := range c.got {
		if m.Kind == NoteAgent && m.Request.ID == id {
			out = append(out, m.Gone)
		}
	}
	return out
}

func textReply(s string) Reply {
	return Reply{ClientID: "phone", Nickname: "phone", Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Text: s}}}}
}

// TestAgentGoneNotice: the screens learn that no agent waits for a request
// OrphanNotice after its last caller left, and that one came back; a caller
// back within the notice (a blip, a server restart) is never shown as gone.
func TestAgentGoneNotice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{OrphanNotice: 5 * time.Second, OrphanGrace: time.Hour})
		c := newFake("c")
		h.Join("tok", c, nil, Resume{})
		cancel, _ := askIn(h, "r1", "/p")
		synctest.Wait()
		cancel()
		synctest.Wait()
		time.Sleep(4 * time.Second)
		cancel, _ = askIn(h, "r1", "/p") // back within the notice
		synctest.Wait()
		time.Sleep(time.Minute)
		if got := agentStatus(c, "r1"); len(got) != 0 {
			t.Fatalf("a blip was announced: %v", got)
		}
		cancel()
		synctest.Wait()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := agentStatus(c, "r1"); len(got) != 1 || !got[0] {
			t.Fatalf("after the notice: %v, want [true]", got)
		}
		if ps := pendingOf(h, "tok"); len(ps) != 1 || !ps[0].Gone {
			t.Fatalf("pending = %v", ps)
		}
		_, reply := askIn(h, "r1", "/p") // the agent re-attaches
		synctest.Wait()
		if got := agentStatus(c, "r1"); len(got) != 2 || got[1] {
			t.Fatalf("after re-attaching: %v, want [true false]", got)
		}
		if ps := pendingOf(h, "tok"); ps[0].Gone {
			t.Fatal("still listed as gone")
		}
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "r1", textReply("yes")); err != nil {
			t.Fatal(err)
		}
		if r := <-reply; r == nil || r.Contents[0].GetText().GetText() != "yes" {
			t.Fatalf("reply = %v", r)
		}
		// Answered while its agent waited: nothing kept for another call.
		if ms := h.TakeMissed("tok", "/p", nil, 0); len(ms) != 0 {
			t.Fatalf("kept %v", ms)
		}
	})
}

// TestMissedAnswerHandedOverOnce: an answer given while no agent waited is
// kept for the next call of the same token and project, handed over once,
// never to another project or token, and forgotten after MissedRetention.
func TestMissedAnswerHandedOverOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{OrphanGrace: time.Hour, MissedRetention: 24 * time.Hour})
		for _, id := range []string{"r1", "r2", "r3"} {
			project := "/p"
			if id == "r3" {
				project = "/other"
			}
			cancel, _ := askIn(h, id, project)
			synctest.Wait()
			cancel()
			synctest.Wait()
			time.Sleep(time.Second)
			if err := h.Answer(context.Background(), "tok", wire.AskQuestion, id, textReply("answer "+id)); err != nil {
				t.Fatal(err)
			}
		}
		if ms := h.TakeMissed("other-token", "/p", nil, 0); len(ms) != 0 {
			t.Fatalf("another token got %v", ms)
		}
		if ms := h.TakeMissed("tok", "/p", []string{"r1"}, 0); len(ms) != 1 || ms[0].ID != "r2" {
			t.Fatalf("except r1: %v", ms)
		}
		ms := h.TakeMissed("tok", "/p", nil, 0)
		if len(ms) != 1 || ms[0].ID != "r1" || ms[0].Text != "q r1?" || ms[0].Reply.Contents[0].GetText().GetText() != "answer r1" {
			t.Fatalf("took %+v", ms)
		}
		if ms := h.TakeMissed("tok", "/p", nil, 0); len(ms) != 0 {
			t.Fatalf("handed over twice: %v", ms)
		}
		time.Sleep(24*time.Hour + time.Second)
		if ms := h.TakeMissed("tok", "/other", nil, 0); len(ms) != 0 {
			t.Fatalf("kept past MissedRetention: %v", ms)
		}
	})
}

// TestMissedAnswerAcrossRestart: a kept answer survives a server restart,
// and so does its hand-over; an agent re-attaching by ID gets it too.
func TestMissedAnswerAcrossRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, restart := restartable(t)
		restored(t, h)
		for _, id := range []string{"gone1", "gone2", "waited"} {
			cancel, reply := askIn(h, id, "/p")
			synctest.Wait()
			if id != "waited" {
				cancel()
				<-reply // Ask returns once the call is detached
			}
			if err := h.Answer(context.Background(), "tok", wire.AskQuestion, id, textReply("answer "+id)); err != nil {
				t.Fatal(err)
			}
			if id == "waited" {
				<-reply
			}
			cancel()
		}
		h.Close()
		h, _ = restart()
		restored(t, h)
		// Another request reusing gone2's ID gets nothing; gone2's agent
		// re-attaching by ID gets its answer, which is then no longer offered
		// to other calls.
		if _, err := h.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "gone2", ProjectDirectory: "/p", Text: "another?", Timeout: time.Hour}); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("another request with gone2's ID: %v", err)
		}
		if r, err := h.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "gone2", ProjectDirectory: "/p", Text: "q gone2?", Timeout: time.Hour}); err != nil ||
			r.Contents[0].GetText().GetText() != "answer gone2" {
			t.Fatalf("re-attached: %v %v", r, err)
		}
		ms := h.TakeMissed("tok", "/p", nil, 0)
		if len(ms) != 1 || ms[0].ID != "gone1" || ms[0].Reply.Contents[0].GetText().GetText() != "answer gone1" || ms[0].Reply.Nickname != "phone" {
			t.Fatalf("after a restart: %+v", ms)
		}
		h.Close()
		h, _ = restart()
		restored(t, h)
		if ms := h.TakeMissed("tok", "/p", nil, 0); len(ms) != 0 {
			t.Fatalf("handed over again after a restart: %+v", ms)
		}
		// The history still has every answer.
		items, _, err := h.History("tok", time.Now().Add(time.Hour), 10)
		if err != nil || len(items) != 3 {
			t.Fatalf("history: %d items, %v", len(items), err)
		}
	})
}

// TestMissedBounded: a room keeps at most maxMissed answers for absent
// agents, the newest.
func TestMissedBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	h := New(Options{Now: func() time.Time { return now }})
	r := h.room("tok")
	for i := range maxMissed + 10 {
		rec := store.Record{Room: r.digest, ID: fmt.Sprint("m", i), Kind: int(wire.AskQuestion), ProjectDirectory: "/p",
			Status: store.Answered, Reply: encodeReply(&Reply{}), ClosedAt: now.Add(time.Duration(i) * time.Second), ClosedNote: ReasonUndelivered}
		if _, err := h.shared.Create(context.Background(), SharedRecord{Record: rec, Holder: h.self}); err != nil {
			t.Fatal(err)
		}
	}
	ms := h.TakeMissed("tok", "/p", nil, 0)
	if len(ms) != maxMissed || ms[0].ID != "m10" || ms[len(ms)-1].ID != fmt.Sprint("m", maxMissed+9) {
		t.Fatalf("kept %d, want %d from m10", len(ms), maxMissed)
	}
	if len(r.missed) != 0 || len(r.missedOrder) != 0 {
		t.Fatalf("left %d, order %d", len(r.missed), len(r.missedOrder))
	}
}

// TestTakenAnswerNotHandedTwice: an answer kept for an absent agent and
// taken by another call of the project is not also given to the first
// call re-attaching by ID: two agents would act on one answer. The
// re-attaching call hears where the answer went.
func TestTakenAnswerNotHandedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{OrphanGrace: time.Hour})
		answeredAway(t, h, "q1", textReply("yes, delete it"))
		if ms := h.TakeMissed("tok", "/p", nil, 8); len(ms) != 1 {
			t.Fatalf("took %v", ms)
		}
		_, err := h.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "q1", ProjectDirectory: "/p", Text: "q q1?", Timeout: time.Hour})
		if !errors.Is(err, ErrHandedOver) {
			t.Fatalf("re-attaching after another call took the answer: %v, want ErrHandedOver", err)
		}
	})
}

// An answer that settles the request in the very moment its caller's call
// ends is not lost: the call ends with its context's error, whichever the
// caller saw first, and the answer is kept for the project's next call,
// once, as one given after the call had gone. The hub holds the woken
// caller (Hub.woke) until the other event has happened too, so each order
// is met every time.
func TestAnswerAsTheCallEnds(t *testing.T) {
	for _, answerFirst := range []bool{true, false} {
		name := "call ends as the answer wakes its caller"
		if !answerFirst {
			name = "answer comes as the call's end wakes its caller"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := New(Options{OrphanGrace: time.Hour})
				woke, goOn := make(chan struct{}), make(chan struct{})
				h.woke = func() {
					woke <- struct{}{}
					<-goOn
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				type result struct {
					r   *Reply
					err error
				}
				out := make(chan result, 1)
				go func() {
					r, err := h.Ask(ctx, "tok", Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "q?", Timeout: time.Hour})
					out <- result{r, err}
				}()
				synctest.Wait() // the caller waits
				answer := func() {
					if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "q", textReply("yes")); err != nil {
						t.Fatal(err)
					}
				}
				if answerFirst {
					answer()
					<-woke
					cancel()
				} else {
					cancel()
					<-woke
					answer()
				}
				close(goOn)
				res := <-out
				if res.err == nil {
					t.Fatalf("the call that ended got the answer %v, which its client no longer reads", res.r)
				}
				ms := h.TakeMissed("tok", "/p", nil, 10)
				if len(ms) != 1 || ms[0].ID != "q" {
					t.Fatalf("kept for the next call: %+v, want the answer", ms)
				}
				if again := h.TakeMissed("tok", "/p", nil, 10); len(again) != 0 {
					t.Fatalf("handed over twice: %+v", again)
				}
			})
		})
	}
}

// A request whose creator takes missed answers is not withdrawn when a
// caller that does not (the older agentassistant's MCP, re-attaching with
// the same ID and request) leaves: its creator may still come back.
func TestOnlyItsOwnKindOfCallerWithdrawsARequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{OrphanGrace: time.Hour})
		c := newFake("c")
		h.Join("tok", c, nil, Resume{})
		req := Request{Kind: wire.AskQuestion, ID: "q", ProjectDirectory: "/p", Text: "q?", Timeout: time.Hour}
		ctx1, cancel1 := context.WithCancel(context.Background())
		go func() { _, _ = h.Ask(ctx1, "tok", req) }()
		synctest.Wait()
		cancel1() // the creator's call drops: orphaned, it may come back
		synctest.Wait()
		older := req
		older.WithdrawOnLeave = true
		ctx2, cancel2 := context.WithCancel(context.Background())
		go func() { _, _ = h.Ask(ctx2, "tok", older) }()
		synctest.Wait()
		cancel2()
		synctest.Wait()
		if ps := pendingOf(h, "tok"); len(ps) != 1 {
			t.Fatalf("pending %v: the request was withdrawn by a caller that did not make it", ps)
		}
	})
}

// TestClearKeepsAnswerForAbsentAgent: clearing the history on one server,
// as in a cluster, leaves an answer kept for an absent agent until it is
// handed over, across a restart too; the other settled requests go.
func TestClearKeepsAnswerForAbsentAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, restart := restartable(t)
		restored(t, h)
		for _, id := range []string{"gone", "waited"} {
			cancel, reply := askIn(h, id, "/p")
			synctest.Wait()
			if id == "gone" {
				cancel()
				<-reply
			}
			if err := h.Answer(context.Background(), "tok", wire.AskQuestion, id, textReply("answer "+id)); err != nil {
				t.Fatal(err)
			}
			if id == "waited" {
				<-reply
			}
			cancel()
		}
		if n, err := h.ClearHistory("tok"); err != nil || n != 1 {
			t.Fatalf("ClearHistory = %d, %v; want 1 (the answer the agent had)", n, err)
		}
		h.Close()
		h, _ = restart()
		restored(t, h)
		if ms := h.TakeMissed("tok", "/p", nil, 0); len(ms) != 1 || ms[0].ID != "gone" {
			t.Fatalf("after the clear and a restart: %+v", ms)
		}
	})
}

// TestKeptAnswerReattachedPastRetention: an answer kept for an absent
// agent outlives the outcomes kept for re-attaching callers (Retention,
// 10 minutes, against MissedRetention's day). The agent re-attaching by
// ID past Retention is handed it from the record; the project's next
// call must then not be handed it again.
func TestKeptAnswerReattachedPastRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{OrphanGrace: time.Hour, Retention: 10 * time.Minute, MissedRetention: 24 * time.Hour})
		defer h.Close()
		answeredAway(t, h, "q1", textReply("yes, delete it"))
		time.Sleep(11 * time.Minute)
		// Another outcome makes the room forget those past Retention.
		cancel2, _ := askIn(h, "q2", "/other")
		synctest.Wait()
		cancel2()
		synctest.Wait()
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "q2", textReply("no")); err != nil {
			t.Fatal(err)
		}

		rep, err := h.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "q1", ProjectDirectory: "/p", Text: "q q1?", Timeout: time.Hour})
		if err != nil || rep == nil || rep.Contents[0].GetText().GetText() != "yes, delete it" {
			t.Fatalf("re-attaching past Retention: %v %v", rep, err)
		}
		if ms := h.TakeMissed("tok", "/p", nil, 0); len(ms) != 0 {
			t.Fatalf("the project's next call was handed the answer its agent had: %+v", ms)
		}
	})
}
