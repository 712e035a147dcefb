package hub

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// What a room has waiting for an answer is bounded by count and bytes.
// A question's text may be as long as a Connect message (16 MiB), and
// every waiting request is held in memory, in the store and in each
// device's list of what waits, so without a bound one token's agent (a
// buggy loop, a leaked token) asking thousands at once makes the server
// hold gigabytes: 64 questions of 4 MB took 1.6 GB. Past a bound the new
// request is refused, never an older one withdrawn: what waits may be
// the person's own agent's question, and a refusal is told to the agent
// that asked, at once, as every other refusal is. Requests heard from
// another instance or restored from the store are never refused; they
// count for the next one.

// The bounds a room has unless the options say (Options.MaxPending,
// Options.MaxPendingBytes): far more than a person answers at once.
const (
	defaultMaxPending      = 256
	defaultMaxPendingBytes = 64 << 20
)

// ErrTooManyPending: the room has as many requests waiting, or bytes of
// them, as it may; the request is refused, not shown. ErrPendingBytes
// wraps it when the bytes were the bound.
var (
	ErrTooManyPending = errors.New("too many requests waiting for an answer under this token")
	ErrPendingBytes   = fmt.Errorf("%w, in bytes", ErrTooManyPending)
)

// requestBytes is what req costs to hold while it waits: its text,
// project directory, names and choices.
func requestBytes(req *Request) int64 {
	n := len(req.Text) + len(req.ProjectDirectory) + len(req.AgentName) + len(req.ReasoningModelName) + len(req.McpClientName)
	for _, q := range req.Questions {
		n += proto.Size(q)
	}
	return int64(n)
}

// pendingRoomLocked is nil when r may take req as one more waiting
// request, else why not (wrapping ErrTooManyPending). Called with r.mu
// held, in the same hold that adds req, so a burst of asks cannot
// overshoot the bounds.
func (h *Hub) pendingRoomLocked(r *room, req *Request) error {
	if len(r.pending) >= h.maxPending {
		return fmt.Errorf("%w: %d wait, the most a token may have", ErrTooManyPending, len(r.pending))
	}
	held, size := int64(0), requestBytes(req)
	for _, p := range r.pending {
		held += requestBytes(&p.req)
	}
	if held+size > h.maxPendingBytes {
		return fmt.Errorf("%w: %d bytes wait and this request is %d more, past the %d a token may have", ErrPendingBytes, held, size, h.maxPendingBytes)
	}
	return nil
}
