package channel

import (
	"context"
	"sync"
)

// slackAck acknowledges one Socket Mode envelope, once: what is
// acknowledged Slack never sends again, so an envelope carrying an
// answer is acknowledged once that answer is saved, or the person told
// why not (slackUnsavedNote for a press that cannot wait).
type slackAck struct {
	once sync.Once
	send func()
	// done is closed once it is acknowledged: an envelope Slack sent
	// again while this one was handled is acknowledged then.
	done chan struct{}
	// handedOver: no longer acknowledged when event returns, but by
	// whoever it was handed to (a held reply, a wait for the first
	// delivery). Touched only by the goroutine handling its event.
	handedOver bool
}

func newSlackAck(send func()) *slackAck {
	return &slackAck{send: send, done: make(chan struct{})}
}

// ack acknowledges the envelope, the first time it is called; a
// caller meanwhile waits for that acknowledgement to be sent.
func (a *slackAck) ack() {
	if a == nil {
		return
	}
	a.once.Do(func() {
		a.send()
		close(a.done)
	})
}

// acked reports whether the envelope is acknowledged.
func (a *slackAck) acked() bool {
	if a == nil {
		return true
	}
	select {
	case <-a.done:
		return true
	default:
		return false
	}
}

// handOver tells event not to acknowledge a when it returns: the
// caller does, later.
func (a *slackAck) handOver() {
	if a != nil {
		a.handedOver = true
	}
}

// finish acknowledges a when event is done with it, unless handed over.
func (a *slackAck) finish() {
	if a != nil && !a.handedOver {
		a.ack()
	}
}

type slackAckKey struct{}

// ackOf is the envelope of the event ctx handles, nil when none.
func ackOf(ctx context.Context) *slackAck {
	a, _ := ctx.Value(slackAckKey{}).(*slackAck)
	return a
}

// slackUnsavedNote is told to a person whose press is acknowledged
// before its answer is saved (Slack shows them an error past 3 s): the
// answer is still being tried, and once saved the question's message
// says so; a server killed meanwhile loses it, and Slack does not send
// an acknowledged press again.
const slackUnsavedNote = "Your answer is not saved yet: the server cannot store it just now and keeps trying for half a minute. " +
	"If this question still shows as waiting after that, press again."

// slackBusyNote is told instead while the press still waits for a
// worker, every one busy with other messages (a reply's image
// downloading, say): nothing is wrong with the store, and the answer is
// saved once its turn comes.
const slackBusyNote = "Your answer is not saved yet: the server is busy with other messages and saves it as soon as it can. " +
	"If this question still shows as waiting in a minute, press again."

// afterFirst acknowledges env, an envelope Slack sent again, once the
// first delivery of its event (first) is acknowledged: not before that
// one's answer is saved. A goroutine of Listen's (holds) waits for it;
// none to wait with, or Listen's end, and it is left unacknowledged for
// Slack to send again.
func (s *Slack) afterFirst(ctx context.Context, env, first *slackAck) {
	if env == nil || first.acked() {
		return
	}
	env.handOver()
	h, ok := ctx.Value(slackHoldsKey{}).(*slackHolds)
	if !ok {
		return
	}
	h.wg.Go(func() {
		select {
		case <-first.done:
			env.ack()
		case <-h.lead.Done():
		}
	})
}
