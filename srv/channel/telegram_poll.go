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
// it has been handled; one taken is handled to its end even when the
// lead is lost meanwhile, and those after it are left to Telegram for
// the next poller (which may read the one handled again, unconfirmed:
// the handlers tell a reply or a tap taken before, see tookAlready).
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

// poll hands the bot's updates to b's handlers, one at a time, until ctx
// ends.
func (t *Telegram) poll(ctx context.Context, b *bot.Bot) {
	client := &http.Client{Timeout: pollWait + pollSlack, Transport: t.transport}
	var offset int64 // 0: from the oldest Telegram has not forgotten
	// held: the updates to be handled again; done: those handled after
	// the oldest held, which getUpdates hands again until it is
	// confirmed. Both are among the maxUpdates from offset.
	held := map[int64]*heldUpdate{}
	done := map[int64]bool{}
	delay := time.Duration(0)
	// refused is the wait while the bot token is refused, 0 while it is
	// not.
	refused := time.Duration(0)
	unreachable := false // told that getUpdates fails, until it does not
	for ctx.Err() == nil {
		if delay > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
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
		for _, u := range ups {
			if ctx.Err() != nil {
				return // the lead is lost: the rest is the next poller's
			}
			h := held[u.ID]
			if done[u.ID] {
				continue
			}
			if h != nil && time.Now().Before(h.next) {
				if !h.aside {
					break // those after it wait with it
				}
				continue
			}
			tr := &updateTry{last: h != nil && time.Since(h.since) >= retryFor}
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handleFor)
			b.ProcessUpdate(context.WithValue(hctx, updateTryKey{}, tr), u)
			cancel()
			if !tr.again {
				delete(held, u.ID)
				done[u.ID] = true
				continue
			}
			if h == nil {
				h = &heldUpdate{since: time.Now()}
				held[u.ID] = h
			}
			h.wait, h.aside = min(max(2*h.wait, pollRetry), pollMaxRetry), tr.aside
			if tr.aside {
				h.wait = min(h.wait, asideMaxRetry)
			}
			h.next = time.Now().Add(h.wait)
			if !tr.aside || len(held) >= maxUpdates {
				break // those after it wait with it
			}
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
		if len(held) > 0 {
			// getUpdates hands the held ones at once: ask again when the
			// first is due.
			next := time.Time{}
			for _, h := range held {
				if next.IsZero() || h.next.Before(next) {
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
