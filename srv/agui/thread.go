package agui

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// maxDone bounds the tool call ids kept to make phase two idempotent.
const maxDone = 4096

// What a thread's queue holds for its frontend's runs, bounded as a
// WebSocket peer's send queue is (wsconn's defaults): frames, and bytes
// (one frame past them is taken into an empty queue, as there). A
// frontend that reads slowly, or has no run open, makes the agent's next
// message be refused to it rather than held.
const (
	maxQueue      = 256
	maxQueueBytes = 16 << 20
)

// thread is one AG-UI thread: the host of the relay session of its
// threadId. What the relay sends it waits in queue for a run to stream.
type thread struct {
	h     *Handler
	id    string
	token string // its room: Handler.threads[token], under id
	// Adapter joins it as the host and answers what every host answers
	// alike; its replies are the Handler's goroutines.
	relay.Adapter

	mu      sync.Mutex
	queue   []relay.Envelope // tool.call, agent.message, relay.agent.waiting, relay.replaced
	queued  int              // the bytes of queue (queuedSize)
	wake    chan struct{}    // closed when queue grows
	running bool
	run     uint64 // counts the runs: the open one's number while running
	gone    bool   // another host took over, or the frontend went away
	// away is armed while the frontend is expected and has no run open:
	// a tool call waits for it, or its last run was cut off. awayRound
	// names the arming, so a timer that fires after a run came does
	// nothing (see Handler.goneAway).
	away      *time.Timer
	awayRound uint64
	state     json.RawMessage
	tools     map[string]string // the latest run's tools: the agent's name (and the frontend's) → the frontend's
	calls     map[string]string // tool call id → tool name: streamed, no result yet
	done      map[string]string // tool call id → tool name: result delivered
	users     map[string]bool   // user message ids already posted
	// agentsTurn: a run gave the agent a user message or tool results,
	// and it has not yielded (wait_user_message) since: it is at work,
	// between its calls perhaps.
	agentsTurn bool
}

func newThread(h *Handler, id string) *thread {
	return &thread{
		h: h, id: id, wake: make(chan struct{}), state: json.RawMessage("{}"),
		tools: map[string]string{}, calls: map[string]string{}, done: map[string]string{}, users: map[string]bool{},
	}
}

// Deliver is the relay's: called with the relay session's lock held.
func (t *thread) Deliver(env relay.Envelope) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Lifecycle(env, func() any { return t.state }) {
		return true
	}
	switch env.Type {
	case relay.TypeAgentWaiting:
		t.agentsTurn = false
		if !t.running {
			return true // no run to finish
		}
		t.pushLocked(env, true)
	case relay.TypeUserPosted:
		t.dropWaitsLocked() // the agent waited for this message
	case wire.TypeReplaced:
		t.gone = true
		t.pushLocked(env, true)
	case wire.TypeToolCall:
		if !t.pushLocked(env, false) {
			return false // the relay tells the agent
		}
		if !t.running {
			t.armLocked() // it waits for the frontend's next run
		}
	case wire.TypeAgentMessage:
		return t.pushLocked(env, false)
	}
	return true
}

// armLocked starts the frontend's grace, unless it runs already: the
// frontend has been expected since then.
func (t *thread) armLocked() {
	if t.away != nil || t.gone {
		return
	}
	t.awayRound++
	round := t.awayRound
	t.away = time.AfterFunc(t.h.o.FrontendGrace, func() { t.h.goneAway(t, round) })
}

// disarmLocked ends the grace: the frontend came back (or the thread ends).
func (t *thread) disarmLocked() {
	if t.away != nil {
		t.away.Stop()
		t.away = nil
	}
	t.awayRound++
}

// expectedLocked reports whether a tool call waits for the frontend: sent
// in a run and not answered, or queued for its next run.
func (t *thread) expectedLocked() bool {
	if len(t.calls) > 0 {
		return true
	}
	for _, e := range t.queue {
		if e.Type == wire.TypeToolCall {
			return true
		}
	}
	return false
}

// pushLocked queues env for the runs, unless the queue is full (false);
// force queues the relay's own small signals (the agent's yield, a
// replacement) whatever it holds: a run's end must not be lost.
func (t *thread) pushLocked(env relay.Envelope, force bool) bool {
	n := queuedSize(env)
	if !force && (len(t.queue) >= maxQueue || (len(t.queue) > 0 && t.queued+n > maxQueueBytes)) {
		return false
	}
	t.queue = append(t.queue, env)
	t.queued += n
	close(t.wake)
	t.wake = make(chan struct{})
	return true
}

// queuedSize is what env holds in the queue, for its bound in bytes.
func queuedSize(env relay.Envelope) int {
	return len(env.Type) + len(env.ID) + len(env.ReplyTo) + len(env.Payload)
}

// setQueueLocked makes q the queue and counts its bytes again; the
// caller has cleared what it took out of the old one's array, so
// nothing keeps their payloads.
func (t *thread) setQueueLocked(q []relay.Envelope) {
	if len(q) == 0 {
		q = nil
	}
	t.queue, t.queued = q, 0
	for _, e := range q {
		t.queued += queuedSize(e)
	}
}

// idle reports whether nothing waits on t: no open run, no tool call
// sent to its frontend or queued for it.
func (t *thread) idle() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.running && !t.expectedLocked()
}

func (t *thread) isGone() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.gone
}

// open starts a run and returns its number: false if one is open. A
// yield from before the run is stale: the agent waits for this run's
// message.
func (t *thread) open() (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running {
		return 0, false
	}
	t.running = true
	t.run++
	t.disarmLocked()
	t.dropWaitsLocked()
	return t.run, true
}

func (t *thread) dropWaitsLocked() {
	q := t.queue[:0]
	for _, e := range t.queue {
		if e.Type != relay.TypeAgentWaiting {
			q = append(q, e)
		}
	}
	clear(t.queue[len(q):])
	t.setQueueLocked(q)
}

// giveTurn records that the agent was given something to work on, and
// returns whether it had the turn before.
func (t *thread) giveTurn() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	was := t.agentsTurn
	t.agentsTurn = true
	return was
}

// takeTurnBack undoes giveTurn when nothing reached the agent after all.
func (t *thread) takeTurnBack(was bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.agentsTurn = was
}

// atWork reports whether the agent has the turn (see agentsTurn).
func (t *thread) atWork() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.agentsTurn
}

// yielded queues the end of the run: the agent has yielded the turn.
func (t *thread) yielded() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pushLocked(relay.Envelope{Type: relay.TypeAgentWaiting}, true)
}

// close ends run number run (nothing if it has ended already). lost says
// the frontend went away before the run's end reached it. A frontend that
// is expected from now on, or lost, has FrontendGrace to start a run.
func (t *thread) close(run uint64, lost bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.running || t.run != run {
		return
	}
	t.running = false
	if lost || t.expectedLocked() {
		t.armLocked()
	}
}

// typeAgentLate is next's when late fires first: no agent has spoken.
const typeAgentLate = "agui.agent.late"

// typeKeepAlive is what next returns when the run's keep-alive ticks.
const typeKeepAlive = "agui.keepalive"

// next waits for the next envelope for the run: false when ctx ends or
// the handler closes; typeAgentLate when late fires first. A tool call
// whose agent stopped waiting is dropped.
func (t *thread) next(ctx context.Context, closed <-chan struct{}, late, beat <-chan time.Time) (relay.Envelope, bool) {
	for {
		t.mu.Lock()
		if len(t.queue) > 0 {
			env := t.queue[0]
			t.queue[0] = relay.Envelope{} // the array does not keep its payload
			t.queue = t.queue[1:]
			t.queued -= queuedSize(env)
			if len(t.queue) == 0 {
				t.queue = nil
			}
			t.mu.Unlock()
			if env.Type == wire.TypeToolCall && !t.Ext.Waiting(env.ID) {
				continue
			}
			return env, true
		}
		wake := t.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return relay.Envelope{}, false
		case <-closed:
			return relay.Envelope{}, false
		case <-late:
			return relay.Envelope{Type: typeAgentLate}, true
		case <-beat:
			return relay.Envelope{Type: typeKeepAlive}, true
		}
	}
}

// moreCalls takes the tool calls already queued, so calls the agent made
// together reach the frontend in one run.
func (t *thread) moreCalls() []relay.Envelope {
	t.mu.Lock()
	var calls, rest []relay.Envelope
	for _, e := range t.queue {
		if e.Type == wire.TypeToolCall {
			calls = append(calls, e)
		} else {
			rest = append(rest, e)
		}
	}
	clear(t.queue)
	t.setQueueLocked(rest)
	t.mu.Unlock()
	out := calls[:0]
	for _, e := range calls {
		if t.Ext.Waiting(e.ID) {
			out = append(out, e)
		}
	}
	return out
}

// emitCall streams a tool call to the frontend (phase one), or refuses
// one to a tool this run did not declare.
func (t *thread) emitCall(s *stream, env relay.Envelope) bool {
	var p struct {
		ToolName string          `json:"toolName"`
		Params   json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(env.Payload, &p)
	args := string(p.Params)
	if args == "" || args == "null" {
		args = "{}"
	}
	t.mu.Lock()
	name, known := t.tools[p.ToolName]
	if known {
		t.calls[env.ID] = name
	}
	t.mu.Unlock()
	if !known {
		b, _ := json.Marshal(map[string]any{"ok": false, "code": wire.InvalidParams,
			"message": fmt.Sprintf("the AG-UI frontend of thread %q declares no tool %q", t.id, p.ToolName)})
		_ = t.Ext.Send(relay.Envelope{Type: wire.TypeToolResult, ReplyTo: env.ID, Payload: b}) // carries no state
		return false
	}
	s.emit(event{"type": ToolCallStart, "toolCallId": env.ID, "toolCallName": name})
	s.emit(event{"type": ToolCallArgs, "toolCallId": env.ID, "delta": args})
	s.emit(event{"type": ToolCallEnd, "toolCallId": env.ID})
	return true
}
