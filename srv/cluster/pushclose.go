package cluster

// The closes of questions pushed (push.Closes): a key per question and
// device in the claims bucket (it forgets them after claimsFor), whose
// value is where its notification stands (closeRecord), and which
// instance, in which run, wrote it. A close is taken over from another
// instance (Left, Adopt) only once that run is gone from the instances
// bucket (its heartbeat stopped: killed, stopped, cut from NATS, or
// restarted), or the record stood past staleClose: an instance alive
// whose push service is slow finishes its own close, not pushed twice.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentassistant/agentassistant/srv/push"
)

const (
	closePushing = "pushing" // its question's push is in flight
	closePushed  = "pushed"  // its question's push went through
	closeOwed    = "owed"    // settled during the push: its pusher closes
	closeClosing = "closing" // its close is decided, by the instance named, and not pushed yet
	closeClosed  = "closed"  // its close is pushed (or given up)
)

// closeRecord is the value of a close's key: its state, the instance
// and run that wrote it, and what it is of, so that another instance
// can take over a close its instance left (Left, Adopt). A value of an
// older version is its state alone, and so is a close pushed
// (closeClosed), which every version reads.
type closeRecord struct {
	State string `json:"s"`
	By    string `json:"by,omitempty"`
	// Run is the run of By that wrote it (Cluster.run), as its
	// heartbeat names it: an instance restarted under the same name
	// holds none of its earlier run's closes.
	Run  string `json:"run,omitempty"`
	Room string `json:"r,omitempty"`
	ID   string `json:"q,omitempty"`
	Sub  string `json:"d,omitempty"`
}

func readClose(v []byte) closeRecord {
	var r closeRecord
	if len(v) > 0 && v[0] == '{' && json.Unmarshal(v, &r) == nil {
		return r
	}
	return closeRecord{State: string(v)}
}

// staleClose is the age past which a push in flight, or a close decided
// and not pushed, is taken for one whose instance lost it, alive or
// not: longer than a push's tries take.
const staleClose = 2 * time.Minute

// closeTries bounds how long a close's step waits for NATS (a restart,
// a leader elected) before the instance decides alone: a close pushed
// twice rather than none, only when NATS cannot be reached at all.
const closeTries = 20 * time.Second

func closeKey(room, id, sub string) string { return keyOf("c.", room+"\x00"+id+"\x00"+sub) }

// closeStep moves a question's close on from what is stored, by
// compare-and-set: next is given the record stored (State "" for none)
// and its age, and says what state to store ("" for nothing) and what
// to report. A NATS that does not answer (restarting) is tried again,
// for up to closeTries.
func (p *Push) closeStep(ctx context.Context, room, id, sub string, next func(r closeRecord, age time.Duration) (string, bool)) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, closeTries)
	defer cancel()
	key := closeKey(room, id, sub)
	var out bool
	wait := openRetry
	for {
		tctx, tcancel := context.WithTimeout(ctx, openTry)
		_, err := changeKey(tctx, p.claims, key, 16, func(old []byte, rev uint64) ([]byte, bool, error) {
			var age time.Duration
			if rev != 0 {
				if e, err := p.claims.Get(tctx, key); err == nil && e.Revision() == rev {
					age = p.now().Sub(e.Created())
				}
			}
			var to string
			to, out = next(readClose(old), age)
			switch to {
			case "":
				return nil, false, nil
			case closeClosed:
				// Its state alone, as builds before the records carried
				// JSON read it: one not yet upgraded then neither pushes
				// the question after its close nor the close again. No
				// other instance needs more of a close pushed (Left).
				return []byte(closeClosed), true, nil
			}
			b, err := json.Marshal(closeRecord{State: to, By: p.by, Run: p.run, Room: room, ID: id, Sub: sub})
			return b, true, err
		})
		tcancel()
		if err == nil {
			return out, nil
		}
		if ctx.Err() != nil || !p.unreachable(err) || time.Now().Add(wait).After(deadlineOf(ctx)) {
			return false, fmt.Errorf("a push's close: %w", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("a push's close: %w", err)
		case <-t.C:
		}
		wait = min(2*wait, openMaxRetry)
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// Pushing marks the question's push in flight, unless its close is
// pushed, decided or owed already.
func (p *Push) Pushing(ctx context.Context, room, id, sub string) (bool, error) {
	return p.closeStep(ctx, room, id, sub, func(r closeRecord, _ time.Duration) (string, bool) {
		if s := r.State; s == closeOwed || s == closeClosing || s == closeClosed {
			return "", false
		}
		return closePushing, true
	})
}

// Pushed marks the question's push through; true when it was settled
// meanwhile, its close then this instance's (marked closing by it until
// Closed). Closed meanwhile by an instance that took this push for a
// dead one's (TakeOver, Closing), it is not closed again: this instance
// was only slow (stopped), and its push reached the push service before
// it stopped, or is cut.
func (p *Push) Pushed(ctx context.Context, room, id, sub string) (bool, error) {
	return p.closeStep(ctx, room, id, sub, func(r closeRecord, _ time.Duration) (string, bool) {
		switch r.State {
		case closePushing:
			return closePushed, false
		case closeOwed:
			return closeClosing, true
		}
		return "", false
	})
}

// TakeOver makes the close owed to the instance pushing the question
// this instance's (true), unless that one pushed it meanwhile.
func (p *Push) TakeOver(ctx context.Context, room, id, sub string) (bool, error) {
	return p.closeStep(ctx, room, id, sub, func(r closeRecord, _ time.Duration) (string, bool) {
		if r.State == closeOwed {
			return closeClosing, true
		}
		return "", false
	})
}

// Closing is true when the close of a settle is this instance's (marked
// closing by it until Closed): false while the question's push is in
// flight (its instance closes it then), or when it is closed, decided
// or owed already.
func (p *Push) Closing(ctx context.Context, room, id, sub string) (bool, error) {
	return p.closeStep(ctx, room, id, sub, func(r closeRecord, age time.Duration) (string, bool) {
		switch s := r.State; {
		case s == closePushing && age < staleClose:
			return closeOwed, false
		case s == closeOwed || s == closeClosing || s == closeClosed:
			return "", false
		}
		return closeClosing, true
	})
}

// Closed marks the question's close pushed (or given up).
func (p *Push) Closed(ctx context.Context, room, id, sub string) error {
	_, err := p.closeStep(ctx, room, id, sub, func(r closeRecord, _ time.Duration) (string, bool) {
		if r.State == closeClosed {
			return "", false
		}
		return closeClosed, true
	})
	return err
}

// left says whether the close r, its record unchanged for age, is left
// to whichever instance takes it (Left, Adopt): not pushed, unchanged
// for takeOver at least, and either its question's push is through with
// no close decided (the instance where it was settled died before
// deciding: push.Pusher.adopt waits takeOver past the settle), or the
// run that wrote it is gone (held says it lives), or it stood past
// staleClose (its instance lost it: a full queue dropped it).
func left(r closeRecord, age, takeOver time.Duration, held func(closeRecord) bool) bool {
	switch {
	case r.State == "" || r.State == closeClosed || r.Room == "" || age < takeOver:
		return false
	case r.State == closePushed || age >= staleClose:
		return true
	}
	return !held(r)
}

// runs are the runs of the instances alive, by instance, as their
// heartbeats name them (an earlier build's names none).
func (p *Push) runs(ctx context.Context) (map[string]string, error) {
	runs := map[string]string{}
	err := readPresent(ctx, p.insts, jetstream.AllKeys, "the instances", func(e jetstream.KeyValueEntry) error {
		var b beat
		if json.Unmarshal(e.Value(), &b) == nil {
			runs[e.Key()] = b.Run
		}
		return nil
	})
	return runs, err
}

// heldIn says whether r's writer lives, by runs.
func heldIn(runs map[string]string) func(closeRecord) bool {
	return func(r closeRecord) bool {
		run, ok := runs[r.By]
		return ok && r.Run != "" && run == r.Run
	}
}

// Left lists the closes left (left): read from one watch of the
// bucket's latest values, their writers' runs from one of the
// instances'.
func (p *Push) Left(ctx context.Context, age time.Duration) ([]push.Left, error) {
	ctx, cancel := context.WithTimeout(ctx, openTry)
	defer cancel()
	runs, err := p.runs(ctx)
	if err != nil {
		return nil, err
	}
	held := heldIn(runs)
	var out []push.Left
	err = readPresent(ctx, p.claims, "c.>", "the pushes' closes", func(e jetstream.KeyValueEntry) error {
		r := readClose(e.Value())
		if !left(r, p.now().Sub(e.Created()), age, held) {
			return nil
		}
		if tok, ok := p.rooms[r.Room]; ok {
			out = append(out, push.Left{Token: tok, Room: r.Room, ID: r.ID, Sub: r.Sub, Owed: r.State == closeOwed || r.State == closeClosing})
		}
		return nil
	})
	return out, err
}

// Adopt makes the close l this instance's (true) if it is left still,
// as it stands now.
func (p *Push) Adopt(ctx context.Context, l push.Left, age time.Duration) (bool, error) {
	return p.closeStep(ctx, l.Room, l.ID, l.Sub, func(r closeRecord, a time.Duration) (string, bool) {
		if !left(r, a, age, func(r closeRecord) bool { return p.holds(ctx, r) }) {
			return "", false
		}
		return closeClosing, true
	})
}

// holds says whether the run that wrote r lives (its heartbeat is in
// the instances bucket), or cannot be told (NATS did not answer: the
// close is left alone until it can).
func (p *Push) holds(ctx context.Context, r closeRecord) bool {
	ctx, cancel := context.WithTimeout(ctx, openTry)
	defer cancel()
	e, err := p.insts.Get(ctx, r.By)
	if err != nil {
		return !errors.Is(err, jetstream.ErrKeyNotFound)
	}
	var b beat
	if json.Unmarshal(e.Value(), &b) != nil {
		return false
	}
	return heldIn(map[string]string{r.By: b.Run})(r)
}
