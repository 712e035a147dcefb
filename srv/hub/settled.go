package hub

import (
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// settled is the outcome of a request that is no longer pending, kept for
// Retention so a caller that re-attaches (same ID, same request) still
// gets it.
type settled struct {
	sum  digest // of the request
	kind wire.Kind
	// questions are the request's choices, to read its answer against
	// (Reattach).
	questions []*pb.Question
	reply     *Reply
	err       error
	// reason is why it was withdrawn or timed out, as RequestCancelled
	// said it.
	reason string
	at     time.Time
	// takenElsewhere: the answer was kept for an absent agent and another
	// call of the project took it (TakeMissed); a re-attach by ID gets
	// ErrHandedOver, so two agents never act on one answer.
	takenElsewhere bool
	// delivered: a caller here had the answer (cluster mode), so it is
	// not kept for the project's next call when its holder, which had
	// no caller, says it should be (missed.go).
	delivered bool
}

// maxSettled caps the outcomes a room keeps in memory for re-attaching
// callers (the store keeps them all, as history).
const maxSettled = 4096

// keepSettled records an outcome and forgets those older than cutoff, or
// beyond maxSettled: outcomes arrive in time order, so the oldest are at
// the front of settledOrder and each is dropped once.
func (r *room) keepSettled(id string, s *settled, cutoff time.Time) {
	r.settled[id] = s
	r.settledOrder = append(r.settledOrder, id)
	for len(r.settledOrder) > 0 {
		old := r.settledOrder[0]
		o := r.settled[old]
		if o != nil && !o.at.Before(cutoff) && len(r.settledOrder) <= maxSettled {
			break
		}
		if o != nil && o != s {
			delete(r.settled, old)
		}
		r.settledOrder[0] = ""
		r.settledOrder = r.settledOrder[1:]
	}
}

// Answered is the reply the request id of token was answered with,
// while its outcome is kept (Retention); false when it is pending, was
// settled without an answer, or is not known here. A door that takes
// the same answer twice (a chat's update delivered again) tells its
// own answer, taken, from another's.
func (h *Hub) Answered(token, id string) (*Reply, bool) {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.settled[id]
	if s == nil || s.reply == nil {
		return nil, false
	}
	return s.reply, true
}
