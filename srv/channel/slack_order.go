package channel

import (
	"slices"
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

// maxSlackWaiting bounds the events read and not yet handled, of all
// messages: those waiting for a worker, or behind an event of their
// message. Past it one is left unacknowledged, for Slack to send again
// (nearly at once, then after 1 and after 5 minutes). An envelope is a
// few KiB (a press's, with its message's blocks, tens at most).
const maxSlackWaiting = 256

// slackQueue runs a Listen's events: those of one message (a press on
// it, a reply in its thread) one after another, in the order they came,
// so that a question's answers and their redeliveries are taken as they
// were sent; those of different messages side by side, at most
// slackWorkers at a time, the messages waiting for a worker taken in
// the order their first event came. Taking an event never waits (run):
// the connection is read, and a press acknowledged within ackWithin,
// while every worker is busy. Its goroutines are waited for by wait.
type slackQueue struct {
	wg sync.WaitGroup
	mu sync.Mutex // held alone
	// waiting holds, for each message with an event being handled or
	// waiting for a worker, the events not yet begun, in order.
	waiting map[string][]func()
	// ready are the messages waiting for a worker, in the order they
	// came; queued counts the events in waiting; running the workers.
	ready   []string
	queued  int
	running int
}

func newSlackQueue() *slackQueue {
	return &slackQueue{waiting: map[string][]func(){}}
}

// run runs f, an event of the message key, after the events of key
// before it, once a worker is free; at once, in the caller, when key is
// "" (an event of the connection). It never waits: false when f is not
// taken, key having maxSlackQueued waiting or all maxSlackWaiting.
// Every event taken is run, also after Listen's context ends (each then
// lets go of what it may, handle in press and event).
func (q *slackQueue) run(key string, f func()) bool {
	if key == "" {
		f()
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	waiting, busy := q.waiting[key]
	if q.queued >= maxSlackWaiting || len(waiting) >= maxSlackQueued {
		return false
	}
	q.waiting[key] = append(waiting, f)
	q.queued++
	switch {
	case busy:
	case q.running < slackWorkers:
		q.running++
		q.wg.Go(func() { q.work(key) })
	default:
		q.ready = append(q.ready, key)
	}
	return true
}

// work runs the events of key, then of the next message waiting for a
// worker, until none waits.
func (q *slackQueue) work(key string) {
	for {
		q.mu.Lock()
		waiting := q.waiting[key]
		if len(waiting) == 0 {
			delete(q.waiting, key)
			if len(q.ready) == 0 {
				q.running--
				q.mu.Unlock()
				return
			}
			key = q.ready[0]
			q.ready = slices.Delete(q.ready, 0, 1)
			q.mu.Unlock()
			continue
		}
		f := waiting[0]
		q.waiting[key] = waiting[1:]
		q.queued--
		q.mu.Unlock()
		f()
	}
}

// wait waits for the events taken to be handled.
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
