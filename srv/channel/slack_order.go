package channel

import (
	"context"
	"sync"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// slackWorkers bounds the Socket Mode events handled at once: one may
// wait on Slack's file host (a reply's images, up to 30 s) or on the
// records (an answer's save), and the others go on meanwhile.
const slackWorkers = 8

// maxSlackQueued bounds the events of one message waiting behind the
// one handled; past it one is left unacknowledged, for Slack to send
// again.
const maxSlackQueued = 64

// slackQueue runs a Listen's events: those of one message (a press on
// it, a reply in its thread) one after another, in the order they came,
// so that a question's answers and their redeliveries are taken as they
// were sent; those of different messages side by side, at most
// slackWorkers at a time. Its goroutines are waited for by wait.
type slackQueue struct {
	sem chan struct{}
	wg  sync.WaitGroup
	mu  sync.Mutex // held alone
	// waiting holds, for each message with an event being handled, the
	// events that came after it.
	waiting map[string][]func()
}

func newSlackQueue() *slackQueue {
	return &slackQueue{sem: make(chan struct{}, slackWorkers), waiting: map[string][]func(){}}
}

// run runs f, an event of the message key, after the events of key
// before it; at once, in the caller, when key is "" (an event of the
// connection). It waits for a free worker, or ctx's end (false: f is not
// run, nor is it when key has maxSlackQueued waiting).
func (q *slackQueue) run(ctx context.Context, key string, f func()) bool {
	if key == "" {
		f()
		return true
	}
	q.mu.Lock()
	if waiting, busy := q.waiting[key]; busy {
		if len(waiting) >= maxSlackQueued {
			q.mu.Unlock()
			return false
		}
		q.waiting[key] = append(waiting, f)
		q.mu.Unlock()
		return true
	}
	q.waiting[key] = nil
	q.mu.Unlock()
	select {
	case q.sem <- struct{}{}:
	case <-ctx.Done():
		q.mu.Lock()
		delete(q.waiting, key) // nothing runs for key; what waits on it is not run
		q.mu.Unlock()
		return false
	}
	q.wg.Go(func() {
		defer func() { <-q.sem }()
		for {
			f()
			q.mu.Lock()
			waiting := q.waiting[key]
			if len(waiting) == 0 {
				delete(q.waiting, key)
				q.mu.Unlock()
				return
			}
			f, q.waiting[key] = waiting[0], waiting[1:]
			q.mu.Unlock()
		}
	})
	return true
}

// wait waits for the events being handled.
func (q *slackQueue) wait() { q.wg.Wait() }

// slackOrderKey names the message a Socket Mode event is about: the one
// pressed, or the one a reply's thread hangs from. "" for an event of
// the connection.
func slackOrderKey(ev socketmode.Event) string {
	switch d := ev.Data.(type) {
	case slack.InteractionCallback:
		channel, ts := d.Container.ChannelID, d.Container.MessageTs
		if channel == "" {
			channel, ts = d.Channel.ID, d.Message.Timestamp
		}
		return "message\x00" + channel + "\x00" + ts
	case slackevents.EventsAPIEvent:
		if m, ok := d.InnerEvent.Data.(*slackevents.MessageEvent); ok {
			ts := m.ThreadTimeStamp
			if ts == "" {
				ts = m.TimeStamp
			}
			return "message\x00" + m.Channel + "\x00" + ts
		}
		return "event"
	}
	return ""
}
