// Package agui serves POST /agui: an AG-UI frontend (RunAgentInput in,
// Server-Sent Events out) becomes the host of the relay session named by
// its threadId, so the MCP bridge's host tools drive it as they drive the
// booking host. The run's tools are the session's tools, its state is the
// UI state; a user message goes to the agent (wait_user_message); the
// agent's messages stream as text messages, its calls of a frontend tool
// as TOOL_CALL_START/ARGS/END followed by RUN_FINISHED (phase one); a
// later run whose messages end with tool messages carries their results
// back to the waiting calls (phase two).
//
// Files: agui.go the handler and its threads; run.go one run; input.go
// RunAgentInput; phases.go what a run brings to its thread;
// thread.go a thread as a relay host; events.go the SSE events.
//
// Goroutines: a run is served on its request's goroutine; the short
// replies to session.start/end and snapshot.get are sent on goroutines
// the Handler owns (Close waits for them), and so is the end of a
// frontend's grace (a timer's, counted before Close waits, and nothing
// after Close). Locks: Handler.mu before thread.mu; thread.mu is taken
// under the relay session's lock (Deliver) and nothing is taken under it.
package agui

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tmaxmax/go-sse"

	"github.com/agentassistant/agentassistant/internal/lru"
	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/relay"
)

// Options configure the handler.
type Options struct {
	Relay  *relay.Relay
	Guard  *auth.Guard
	Logger *slog.Logger
	// MaxBody bounds a request body, which carries the whole history
	// (default 4 MiB).
	MaxBody int64
	// MaxThreadsPerToken bounds the threads one token keeps as hosts
	// (default 64). Past it the least recently
	// used one that nothing waits on (no open run, no tool call waiting
	// for its frontend) leaves its relay session; when every one is
	// busy, a run of a new thread is refused with RUN_ERROR
	// too_many_threads. One token's threads never make room for
	// another's.
	MaxThreadsPerToken int
	// FrontendGrace is how long a thread waits for its frontend's next
	// run once the frontend is expected (a tool call waits for it) or its
	// run was cut off (the client went away); past it the waiting calls
	// fail, saying so, and the thread leaves its relay session as a host
	// whose page closed (default 10s). Keep it under the
	// 20 s a UI tool call waits, so the agent hears why.
	FrontendGrace time.Duration
	// AgentWait is how long a run that brought the user's message waits
	// for an agent to take it (wait_user_message) when no agent has said
	// anything in the run; past it, with the message still unread and no
	// agent joined on /agent/ws, the run ends with RUN_ERROR no_agent,
	// saying how to connect one; the message is kept for it. A run that
	// brings nothing (no user message, no tool result) waits as long for
	// an agent to be at work or come, then ends with RUN_ERROR no_agent
	// too (default DefaultAgentWait).
	AgentWait time.Duration
	// AgentIdle is how long a run waits on an agent that says nothing
	// (no message, no tool call, no yield) while no agent is in the relay
	// session (none on /agent/ws, no in-process call): past it the run
	// ends with RUN_ERROR agent_gone, so a frontend is not left with a
	// run open forever by an agent that took its message and went away
	// (default DefaultAgentIdle; an agent thinking between calls is not
	// in the session either, so keep it long).
	AgentIdle time.Duration
	// SendTimeout bounds the write of one event to the frontend (default
	// 30s, as /mcp's streams): a frontend that reads nothing for that
	// long has its run cut off, as one that went away.
	SendTimeout time.Duration
}

// DefaultAgentIdle is AgentIdle's default.
const DefaultAgentIdle = 5 * time.Minute

// DefaultAgentWait is AgentWait's default.
const DefaultAgentWait = 30 * time.Second

// Handler is POST /agui. The token has been checked before it runs.
type Handler struct {
	o   Options
	log *slog.Logger

	mu      sync.Mutex
	threads map[string]*lru.Map[string, *thread] // by token, then threadId
	// goroutines are the replies and the ends of graces; Done when
	// Close begins.
	goroutines owned.Group
}

// New returns the handler.
func New(o Options) *Handler {
	opt.Logger(&o.Logger)
	opt.Default(&o.MaxBody, 4<<20)
	opt.Default(&o.MaxThreadsPerToken, 64)
	opt.Default(&o.FrontendGrace, 10*time.Second)
	opt.Default(&o.AgentWait, DefaultAgentWait)
	opt.Default(&o.AgentIdle, DefaultAgentIdle)
	opt.Default(&o.SendTimeout, 30*time.Second)
	return &Handler{o: o, log: o.Logger, threads: make(map[string]*lru.Map[string, *thread])}
}

// Close ends the open runs, leaves every relay session and waits for the
// handler's goroutines. Idempotent.
func (h *Handler) Close() {
	h.goroutines.Stop()
	h.mu.Lock()
	all := h.threads
	h.threads = map[string]*lru.Map[string, *thread]{}
	h.mu.Unlock()
	for _, ts := range all {
		for _, t := range ts.All() {
			t.mu.Lock()
			t.disarmLocked()
			t.mu.Unlock()
			t.Ext.Leave()
		}
	}
	h.goroutines.Wait()
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST a RunAgentInput (JSON) to /agui", http.StatusMethodNotAllowed)
		return
	}
	if !h.o.Guard.OriginAllowed(r) {
		http.Error(w, "forbidden origin", http.StatusForbidden)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
		http.Error(w, "a RunAgentInput is JSON: send Content-Type: application/json", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("RunAgentInput larger than %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
			return
		}
		// Cut off at the body deadline, or broken off.
		http.Error(w, "the RunAgentInput did not arrive whole in time; send it again", http.StatusRequestTimeout)
		return
	}
	in, err := parseInput(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	sess, err := sse.Upgrade(w, r) // Content-Type: text/event-stream with the first event
	if err != nil {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	s := &stream{sess: sess, rc: http.NewResponseController(w), timeout: h.o.SendTimeout, open: map[string]bool{}}
	t, rerr := h.thread(tokenOf(r), in)
	if rerr != nil { // refused before it became a thread: nothing was changed
		h.log.Info("AG-UI run refused", "thread", in.ThreadID, "code", rerr.code, "err", rerr.msg)
		s.emit(event{"type": RunStarted, "threadId": in.ThreadID, "runId": in.RunID})
		s.emit(event{"type": RunError, "message": rerr.msg, "code": rerr.code})
		return
	}
	h.run(r.Context(), t, in, s)
}

// runError is a run refused with RUN_ERROR: its code and message.
type runError struct{ code, msg string }

func (e *runError) Error() string { return e.msg }

// isJSON reports whether the Content-Type ct is JSON (application/json,
// or a +json type).
func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// tokenOf is the token the server checked before the handler ran ("" for
// none, or for conflicting ones, which no token matches).
func tokenOf(r *http.Request) string {
	tok, _ := auth.RequestToken(r)
	return tok
}

// thread returns the thread of (token, in.ThreadID), or the RUN_ERROR
// that refuses the run. A new thread joins its relay session as the host
// only if the run can be served: a run that brings tool results can only
// be an existing thread's (no call waits in a new one), and a token whose
// threads are all busy gets no new one.
func (h *Handler) thread(token string, in *RunAgentInput) (*thread, *runError) {
	id := in.ThreadID
	h.mu.Lock()
	defer h.mu.Unlock()
	ts := h.threads[token]
	if t, ok := ts.Use(id); ok && !t.isGone() {
		t.mu.Lock()
		t.disarmLocked() // it came back: the grace's timer may not act now
		t.mu.Unlock()
		return t, nil
	}
	if res := trailingResults(in); len(res) > 0 {
		return nil, &runError{code: codeInvalidResult, msg: noCallWaiting(res[0].callID(), id)}
	}
	if ts.Len() >= h.o.MaxThreadsPerToken && !h.evictLocked(ts) {
		return nil, &runError{code: "too_many_threads", msg: fmt.Sprintf(
			"this token has %d AG-UI threads and each has a run open or a tool call waiting for its frontend "+
				"([agui] max_threads_per_token); finish one of them, or post to one of them, and try again", ts.Len())}
	}
	if ts == nil {
		ts = &lru.Map[string, *thread]{}
		h.threads[token] = ts
	}
	t := newThread(h, id)
	t.token = token
	t.Join(h.o.Relay, token, id, relay.HostKindAGUI, &h.goroutines, t)
	ts.Put(id, t)
	return t, nil
}

// forgetLocked takes t out of the threads, if it is still there.
func (h *Handler) forgetLocked(t *thread) {
	ts := h.threads[t.token]
	if cur, _ := ts.Get(t.id); cur != t {
		return
	}
	ts.Delete(t.id)
	if ts.Len() == 0 {
		delete(h.threads, t.token)
	}
}

// evictLocked lets the least recently used of ts that nothing waits on
// go: it leaves its relay session, as a host that closed its page. It
// reports whether one went. A thread with an open run, or with a tool
// call sent to its frontend or queued for it, is never let go: the call
// would fail for another thread's sake.
func (h *Handler) evictLocked(ts *lru.Map[string, *thread]) bool {
	_, old, ok := ts.Oldest((*thread).idle)
	if !ok {
		return false
	}
	h.forgetLocked(old)
	old.mu.Lock()
	old.disarmLocked()
	old.gone = true
	old.mu.Unlock()
	old.Ext.Leave()
	return true
}

// goneAway ends the grace armed as round: the frontend of t never came
// back. The tool calls waiting for it fail, each saying whether it
// reached the frontend, and t leaves its relay session, as a host whose
// page closed: it no longer counts as one. A frontend that posts again
// later starts a new thread.
func (h *Handler) goneAway(t *thread, round uint64) {
	h.mu.Lock()
	if !h.goroutines.Enter() { // under h.mu, so before Close takes the threads
		h.mu.Unlock()
		return
	}
	defer h.goroutines.Exit()
	t.mu.Lock()
	if t.awayRound != round || t.running || t.gone {
		t.mu.Unlock()
		h.mu.Unlock()
		return // it came back in time
	}
	t.away, t.gone = nil, true
	var sent, queued []string
	for id := range t.calls {
		sent = append(sent, id)
	}
	for _, e := range t.queue {
		if e.Type == wire.TypeToolCall {
			queued = append(queued, e.ID)
		}
	}
	t.queue = nil
	t.mu.Unlock()
	h.forgetLocked(t)
	h.mu.Unlock()
	g := h.o.FrontendGrace
	for _, id := range sent {
		t.Ext.Fail(id, fmt.Sprintf("the AG-UI frontend of thread %q got this tool call but sent no result: no run came from it within %s "+
			"(its page was closed or lost its connection); the action may or may not have happened", t.id, g))
	}
	for _, id := range queued {
		t.Ext.Fail(id, fmt.Sprintf("the AG-UI frontend of thread %q started no run within %s to receive this tool call "+
			"(an AG-UI frontend hears from the agent only during a run; its page was closed, lost its connection or is idle); "+
			"the call was not delivered and the action did not happen", t.id, g))
	}
	t.Ext.Leave()
	h.log.Info("AG-UI frontend gone: its thread left the relay session", "thread", t.id, "failedCalls", len(sent)+len(queued))
}
