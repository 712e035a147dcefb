package channel

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// The bot's updates, polled here rather than by the library's Start:
// Telegram forgets an update once a getUpdates asks for those after it
// (it is "confirmed"), and the library asks for the next ones as soon as
// it has queued an update, before it is handled. An instance that lost
// its lead (its lease not renewed in time) then held replies that
// Telegram had forgotten and no other instance would read: lost, or
// handled only when it led again. Here an update is confirmed only once
// it and every one before it have been handled (the offset confirms
// all before it); several are handled at once, those of one message in
// order (poll); one taken is handled to its end even when the lead is
// lost meanwhile, and those not taken are left to Telegram for the
// next poller (which may read one handled again, unconfirmed: the
// handlers tell a reply or a tap taken before, see tookAlready).
// An update whose question cannot be looked up (the notes out of reach:
// the link to NATS cut) is not confirmed either: it is handled again,
// here while this instance leads, or by the next, those after it
// waiting with it; only after retryFor is the person told to answer
// again. A reply or tap to one of the bot's messages whose note is not
// there yet (kept by the instance that sent it until NATS takes it) is
// held aside the same way, unconfirmed, for up to retryFor, while those
// after it are handled: getUpdates hands these again until the held one
// is confirmed, and they are passed over (done). What is held and done
// is bounded by the updates one getUpdates hands (maxUpdates).

const (
	// pollWait is how long one getUpdates waits for an update (its
	// "timeout"); the HTTP client waits pollSlack more for the answer.
	pollWait  = 50 * time.Second
	pollSlack = 15 * time.Second
	// handleFor bounds the handling of one update, which the lead's end
	// does not cut short.
	handleFor = 30 * time.Second
	// pollRetry and pollMaxRetry space the polls after an error, and
	// the tries of an update handled again.
	pollRetry    = 100 * time.Millisecond
	pollMaxRetry = 5 * time.Second
	// retryFor is how long an update is handled again: longer than a
	// lease, so that an instance cut off from the notes lets the update
	// go to another before it gives up on it.
	retryFor = 30 * time.Second
)

// updateTry is what the handling of an update tells the poll: to handle
// it again later (again), unless this is its last try. aside: the
// updates after it are handled meanwhile (the store answers, the note
// it needs is not there yet); otherwise they wait with it (the store
// out of reach: they would fail too).
type updateTry struct{ last, again, aside bool }

type updateTryKey struct{}

// later asks the poll to handle the update of ctx again later, not
// confirmed, those after it waiting; false when it will not (its last
// try, or no poll handles it), and the handler says what went wrong.
func later(ctx context.Context) bool {
	tr, ok := ctx.Value(updateTryKey{}).(*updateTry)
	if !ok || tr.last {
		return false
	}
	tr.again = true
	return true
}

// laterAside is later, the updates after it handled meanwhile: for an
// update that waits for a note another instance keeps (mayCome).
func laterAside(ctx context.Context) bool {
	if !later(ctx) {
		return false
	}
	ctx.Value(updateTryKey{}).(*updateTry).aside = true
	return true
}

const (
	// maxUpdates bounds the updates one getUpdates hands (Telegram's own
	// bound, asked for): those held and handled past the offset are
	// among them.
	maxUpdates = 100
	// asideMaxRetry spaces the tries of an update held aside: while it
	// is, the updates after it are read again as often, so a new one
	// waits at most that long.
	asideMaxRetry = time.Second
)

// heldUpdate is an update to be handled again, not confirmed: since its
// first try, its next, and the wait before it.
type heldUpdate struct {
	since, next time.Time
	wait        time.Duration
	aside       bool
}

// telegramWorkers bounds the updates handled at once: one may wait on
// Telegram's file host (a photo reply, up to photoTimeout) or on the
// records, and a tap on another message is answered meanwhile.
const telegramWorkers = 8

// updateKey names what an update is about, whose updates are handled
// one after another, in the order Telegram hands them: the message
// tapped, or replied to, in its chat. A reply and a tap on one message
// are taken as they were sent; those of different messages side by
// side. Another update (one no handler takes) is its own.
func updateKey(u *models.Update) string {
	switch {
	case u.CallbackQuery != nil:
		switch m := u.CallbackQuery.Message; {
		case m.Message != nil:
			return fmt.Sprint("message ", m.Message.Chat.ID, " ", m.Message.ID)
		case m.InaccessibleMessage != nil:
			return fmt.Sprint("message ", m.InaccessibleMessage.Chat.ID, " ", m.InaccessibleMessage.MessageID)
		}
	case u.Message != nil && u.Message.ReplyToMessage != nil:
		return fmt.Sprint("message ", u.Message.Chat.ID, " ", u.Message.ReplyToMessage.ID)
	}
	return fmt.Sprint("update ", u.ID)
}

// updateWorkers run the updates of one poll, at most telegramWorkers at
// once, each handled to its end (within handleFor) also when the lead
// is lost meanwhile; the poll waits for them (wg) before it returns.
type updateWorkers struct {
	wg sync.WaitGroup
	// wake is signalled when an update's handling ends.
	wake chan struct{}
	mu   sync.Mutex // held alone
	// running are the updates being handled, each with its try; ended
	// those whose handling ended, not yet taken by the poll (ended).
	running map[int64]*updateTry
	ended   []int64
}

func newUpdateWorkers() *updateWorkers {
	return &updateWorkers{wake: make(chan struct{}, 1), running: map[int64]*updateTry{}}
}

// start handles u, its try tr, in a goroutine of w's.
func (w *updateWorkers) start(ctx context.Context, b *bot.Bot, u *models.Update, tr *updateTry) {
	w.mu.Lock()
	w.running[u.ID] = tr
	w.mu.Unlock()
	w.wg.Go(func() {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handleFor)
		b.ProcessUpdate(context.WithValue(hctx, updateTryKey{}, tr), u)
		cancel()
		w.mu.Lock()
		w.ended = append(w.ended, u.ID)
		w.mu.Unlock()
		select {
		case w.wake <- struct{}{}:
		default:
		}
	})
}

// busy reports whether the update id is being handled, and how many are.
func (w *updateWorkers) busy(id int64) (bool, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.running[id]
	return ok, len(w.running)
}

// take hands each update whose handling ended, with its try, to f, and
// forgets it.
func (w *updateWorkers) take(f func(id int64, tr *updateTry)) {
	w.mu.Lock()
	ended := w.ended
	w.ended = nil
	trs := make([]*updateTry, len(ended))
	for i, id := range ended {
		trs[i] = w.running[id]
		delete(w.running, id)
	}
	w.mu.Unlock()
	for i, id := range ended {
		f(id, trs[i])
	}
}

// poll hands the bot's updates to b's handlers until ctx ends: those
// of different messages side by side (updateWorkers), those of one
// message one after another (updateKey). An update is confirmed only
// once it and every update before it are handled, so a server killed
// meanwhile is handed again all it had not handled; those it had
// handled after it are told from new ones (tookAlready, tellOnce).
// While an update is being handled, getUpdates hands it again at once:
// the poll then reads again once one's handling ends, or after
// asideMaxRetry, so a new update waits at most that long.
func (t *Telegram) poll(ctx context.Context, b *bot.Bot) {
	client := &http.Client{Timeout: pollWait + pollSlack, Transport: t.transport}
	var offset int64 // 0: from the oldest Telegram has not forgotten
	// held: the updates to be handled again; done: those handled after
	// the oldest not handled, which getUpdates hands again until it is
	// confirmed. Both are among the maxUpdates from offset, as are the
	// updates being handled (workers).
	held := map[int64]*heldUpdate{}
	done := map[int64]bool{}
	workers := newUpdateWorkers()
	defer workers.wg.Wait()
	ended := func(id int64, tr *updateTry) {
		if !tr.again {
			delete(held, id)
			done[id] = true
			return
		}
		h := held[id]
		if h == nil {
			h = &heldUpdate{since: time.Now()}
			held[id] = h
		}
		h.wait, h.aside = min(max(2*h.wait, pollRetry), pollMaxRetry), tr.aside
		if tr.aside {
			h.wait = min(h.wait, asideMaxRetry)
		}
		h.next = time.Now().Add(h.wait)
	}
	delay := time.Duration(0)
	// refused is the wait while the bot token is refused, 0 while it is
	// not.
	refused := time.Duration(0)
	unreachable := false // told that getUpdates fails, until it does not
	for ctx.Err() == nil {
		if delay > 0 {
			wait := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				wait.Stop()
				return
			case <-wait.C:
			case <-workers.wake:
				wait.Stop()
			}
		}
		ups, err := t.getUpdates(ctx, client, offset)
		if re := refusedOf(err); re != nil && ctx.Err() == nil {
			// Not tried again within seconds, nor told at each try: a
			// person must change the token (refused.go).
			if !awaitRefused(ctx, &refused, t.refused(t.Logger).refused(t, re)) {
				return
			}
			delay = 0
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			delay = min(max(2*delay, pollRetry), pollMaxRetry)
			// Told once, not at every try: Telegram out of reach for an
			// hour is one line, and one more when it is back.
			if !unreachable {
				logOf(t.Logger).Warn("telegram: cannot read the bot's updates; trying again, told when it can", "err", err, "retry_every", pollMaxRetry)
				unreachable = true
			} else {
				logOf(t.Logger).Debug("telegram: cannot read the bot's updates", "err", err, "retry_in", delay)
			}
			continue
		}
		if unreachable {
			logOf(t.Logger).Info("telegram: reads the bot's updates again")
			unreachable = false
		}
		if refused > 0 {
			t.refused(t.Logger).accepted(t, telegramBotToken)
			refused = 0
		}
		ups = ups[:min(len(ups), maxUpdates)]
		workers.take(ended)
		// waiting: the messages with an update before this one not
		// handled yet, which the updates after it of that message wait
		// for.
		waiting := map[string]bool{}
		for _, u := range ups {
			if ctx.Err() != nil {
				return // the lead is lost: the rest is the next poller's
			}
			if done[u.ID] {
				continue
			}
			key := updateKey(u)
			h := held[u.ID]
			running, n := workers.busy(u.ID)
			if h != nil && !running && time.Now().Before(h.next) && !h.aside {
				break // those after it wait with it
			}
			if running || waiting[key] || h != nil && time.Now().Before(h.next) {
				waiting[key] = true
				continue
			}
			if n >= telegramWorkers {
				break // the next poll, once one is free
			}
			waiting[key] = true
			workers.start(ctx, b, u, &updateTry{last: h != nil && time.Since(h.since) >= retryFor})
		}
		// Confirmed at the next poll: those handled, up to the first
		// that is not.
		for _, u := range ups {
			if !done[u.ID] {
				break
			}
			offset = max(offset, u.ID+1)
		}
		for id := range done {
			if id < offset {
				delete(done, id)
			}
		}
		for id := range held {
			if id < offset {
				delete(held, id)
			}
		}
		delay = 0
		if _, n := workers.busy(0); n > 0 || len(held) > 0 {
			// getUpdates hands the unconfirmed ones at once: ask again
			// when one's handling ends, when the first held is due, or
			// after asideMaxRetry for the new ones.
			next := time.Now().Add(asideMaxRetry)
			for _, h := range held {
				if h.next.Before(next) {
					next = h.next
				}
			}
			delay = max(time.Until(next), time.Millisecond)
		}
	}
}

// getUpdates asks for the updates from offset (0: the oldest kept),
// which confirms those before it.
func (t *Telegram) getUpdates(ctx context.Context, client *http.Client, offset int64) ([]*models.Update, error) {
	form := url.Values{"timeout": {strconv.Itoa(int(pollWait / time.Second))}, "limit": {strconv.Itoa(maxUpdates)},
		"allowed_updates": {`["message","callback_query"]`}}
	if offset > 0 {
		form.Set("offset", strconv.FormatInt(offset, 10))
	}
	server := strings.TrimRight(t.ServerURL, "/")
	if server == "" {
		server = "https://api.telegram.org"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server+"/bot"+t.BotToken+"/getUpdates", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("get updates: %w", t.redact(err))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get updates: %w", t.redact(err))
	}
	defer func() { _ = resp.Body.Close() }()
	var r struct {
		OK          bool             `json:"ok"`
		Result      []*models.Update `json:"result"`
		ErrorCode   int              `json:"error_code"`
		Description string           `json:"description"`
	}
	// An answer's size is Telegram's to bound (100 updates at most); a
	// few MiB hold them.
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&r); err != nil {
		return nil, fmt.Errorf("get updates: HTTP %d: %w", resp.StatusCode, t.redact(err))
	}
	if !r.OK && (r.ErrorCode == http.StatusUnauthorized || r.ErrorCode == http.StatusNotFound) {
		return nil, telegramRefused(r.ErrorCode, r.Description)
	}
	if !r.OK {
		return nil, fmt.Errorf("get updates: error %d: %s", r.ErrorCode, r.Description)
	}
	return r.Result, nil
}
