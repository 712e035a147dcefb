package push

// A cluster's closes: which instance pushes the close of a question
// settled while another pushed it, kept on record until it is pushed,
// and taken over from an instance that died or stopped before pushing
// it (Closes, closeIfSettled, closed, sweep, adopt, takeOverLater).

import (
	"context"
	"slices"
	"time"

	"github.com/agentassistant/agentassistant/srv/hub"
)

// Closes decide, among the instances of a cluster, which one pushes the
// close of question id to subscription sub: the instance whose push of
// the question is in flight when it is settled elsewhere, once that push
// is through, else the one where it was settled. An error leaves the
// instance to decide alone (a close twice rather than none). Each step
// ends with ctx, the Pusher's: while NATS cannot be reached a step is
// retried for a while, and Close ends it rather than waiting it out.
type Closes interface {
	// Pushing is told before a push of the question: false when its
	// close was pushed, decided or owed already (it is not pushed then).
	Pushing(ctx context.Context, room, id, sub string) (bool, error)
	// Pushed is told once the push went through: true when its close is
	// this instance's to push (it was settled meanwhile).
	Pushed(ctx context.Context, room, id, sub string) (bool, error)
	// Closing is told before the close of a settle's event is pushed:
	// false when the instance pushing the question pushes it.
	Closing(ctx context.Context, room, id, sub string) (bool, error)
	// TakeOver is told Options.TakeOver after Closing said false: true
	// when the close is owed still (its pusher died or stopped mid-push),
	// and now this instance's; the pusher's Pushed then says false.
	TakeOver(ctx context.Context, room, id, sub string) (bool, error)
	// Closed is told once a close this instance was given (Closing,
	// Pushed, TakeOver, Adopt) is pushed or given up. Until then the
	// close is the instance's, on record: another instance takes over
	// one it left (Left).
	Closed(ctx context.Context, room, id, sub string) error
	// Left lists the closes whose record has not changed for age and
	// are not pushed: decided or owed on an instance that died or
	// stopped before pushing them (one that lives pushes its own), or a
	// push of their question (settled since, perhaps on an instance
	// that died before deciding its close).
	Left(ctx context.Context, age time.Duration) ([]Left, error)
	// Adopt makes l this instance's (true) if its record has not changed
	// for age still and its close is not pushed.
	Adopt(ctx context.Context, l Left, age time.Duration) (bool, error)
}

// Left is a close another instance may have left undone (Closes.Left).
type Left struct {
	Token, Room, ID, Sub string
	// Owed: its close was decided or owed; else only its question's
	// push is on record.
	Owed bool
}

// closeIfSettled follows the ask j, just pushed, with its close (queued
// next, tried as any push) when its question was settled meanwhile and
// no close of it is queued here: settled on another instance of a
// cluster, whose close may have reached the push service before this
// ask, the notification would show the question again, for good.
//
// In a cluster, Closes says whether the close is this instance's: then
// it is pushed whatever this instance has heard yet, and no other is.
func (p *Pusher) closeIfSettled(sd *sender, j job) {
	owed, err := false, error(nil)
	if p.o.Closes != nil {
		if owed, err = p.o.Closes.Pushed(p.goroutines.Context(), sd.room, j.msg.ID, sd.sub.ID); err == nil && !owed {
			return
		}
	}
	if _, _, waits := p.o.Hub.Waiting(j.token, j.msg.ID); waits && !owed {
		return
	}
	o, settled := p.o.Hub.Outcome(j.token, j.msg.ID)
	ev := hub.Event{Kind: o.Kind, Token: j.token, Request: j.req, Reply: o.Reply, Reason: o.Reason, At: o.At}
	if !settled || answeredBy(ev, sd.sub) {
		return
	}
	m := settledMessage(ev, sd.room, sd.sub)
	m.Waiting = p.waiting(ev)
	p.mu.Lock()
	defer p.mu.Unlock()
	if sd.closing[j.msg.ID] > 0 && !owed {
		return
	}
	// Settled here, its event may be on its way still: it finds this
	// close queued (early), and queues none.
	if sd.early = append(sd.early, j.msg.ID); len(sd.early) > queueLen {
		sd.early = sd.early[1:]
	}
	p.put(sd, job{msg: m, topic: m.Tag, ttl: time.Hour, owed: owed})
	p.log.Info("push closed next: its question was settled as it was pushed", "subscription", sd.sub.ID, "question", j.msg.ID)
}

// closed tells the cluster that the close j, this instance's, is pushed
// or given up: until then its record names this instance, and another
// takes it over if this one dies (sweep). Not told, another instance
// pushes it again: a close twice rather than none.
func (p *Pusher) closed(sd *sender, j job) {
	if p.o.Closes == nil || j.token != "" {
		return
	}
	if err := p.o.Closes.Closed(p.goroutines.Context(), sd.room, j.msg.ID, sd.sub.ID); err != nil {
		p.log.Warn("push: the cluster's closes unreadable", "subscription", sd.sub.ID, "question", j.msg.ID, "err", err)
	}
}

// sweep takes over, every half of Options.TakeOver, the closes that
// other instances left (Closes.Left): decided or owed there and not
// pushed, or not decided at all, their question settled on an instance
// that died before it pushed its close. A close is then on NATS before
// it is relied upon, and pushed while any instance lives.
func (p *Pusher) sweep() {
	t := time.NewTicker(p.o.TakeOver / 2)
	defer t.Stop()
	for {
		select {
		case <-p.goroutines.Done():
			return
		case <-t.C:
		}
		left, err := p.o.Closes.Left(p.goroutines.Context(), p.o.TakeOver)
		if err != nil {
			p.log.Warn("push: the closes left unreadable", "err", err)
			continue
		}
		for _, l := range left {
			p.adopt(l)
		}
	}
}

// adopt pushes the close l, left by another instance, once its question
// is settled: at once when its close was decided or owed, else once the
// instance where it was settled has had TakeOver to push it.
func (p *Pusher) adopt(l Left) {
	if _, _, waits := p.o.Hub.Waiting(l.Token, l.ID); waits {
		return
	}
	o, settled := p.o.Hub.Outcome(l.Token, l.ID)
	if !settled || !l.Owed && p.o.Now().Sub(o.At) < p.o.TakeOver {
		return
	}
	subs, err := p.o.Subscriptions.List(l.Room)
	if err != nil {
		// Left on record: the next sweep tries it again.
		p.log.Warn("push: the subscriptions unreadable", "question", l.ID, "err", err)
		return
	}
	if ok, err := p.o.Closes.Adopt(p.goroutines.Context(), l, p.o.TakeOver); err != nil || !ok {
		return
	}
	ev := hub.Event{Kind: o.Kind, Token: l.Token, Request: hub.Request{ID: l.ID}, Reply: o.Reply, Reason: o.Reason, At: o.At}
	i := slices.IndexFunc(subs, func(s Subscription) bool { return s.ID == l.Sub })
	if i < 0 || answeredBy(ev, subs[i]) {
		// Gone, or its notification closed at its own tap: nothing to push.
		if err := p.o.Closes.Closed(p.goroutines.Context(), l.Room, l.ID, l.Sub); err != nil {
			p.log.Warn("push: the cluster's closes unreadable", "subscription", l.Sub, "question", l.ID, "err", err)
		}
		return
	}
	m := settledMessage(ev, l.Room, subs[i])
	m.Waiting = p.waiting(ev)
	p.log.Info("push close taken over: the instance it was left to did not push it", "subscription", l.Sub, "question", l.ID)
	p.queue(l.Room, subs[i], job{msg: m, topic: m.Tag, ttl: time.Hour, owed: true})
}

// takeOverLater pushes the close j, left to the instance pushing its
// question, if that instance has not pushed it after Options.TakeOver:
// killed or stopped mid-push, it may never. Of the two, one pushes it
// (Closes.TakeOver and Closes.Pushed compare-and-set the same claim).
func (p *Pusher) takeOverLater(sd *sender, j job) {
	p.goroutines.Go(func() {
		t := time.NewTimer(p.o.TakeOver)
		defer t.Stop()
		select {
		case <-p.goroutines.Done():
			return
		case <-t.C:
		}
		ok, err := p.o.Closes.TakeOver(p.goroutines.Context(), sd.room, j.msg.ID, sd.sub.ID)
		switch {
		case err != nil: // decided alone: a close twice rather than none
			p.log.Warn("push: the cluster's closes unreadable", "subscription", sd.sub.ID, "question", j.msg.ID, "err", err)
		case !ok:
			return
		default:
			p.log.Info("push close taken over: the instance pushing its question did not close it", "subscription", sd.sub.ID, "question", j.msg.ID)
		}
		j.owed = true
		p.queue(sd.room, sd.sub, j)
	})
}
