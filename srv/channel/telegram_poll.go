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
// here while this instance leads, or by the next; only after retryFor
// is the person told to answer again.

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
// it again later (again), unless this is its last try.
type updateTry struct{ last, again bool }

type updateTryKey struct{}

// later asks the poll to handle the update of ctx again later, not
// confirmed; false when it will not (its last try, or no poll handles
// it), and the handler says what went wrong.
func later(ctx context.Context) bool {
	tr, ok := ctx.Value(updateTryKey{}).(*updateTry)
	if !ok || tr.last {
		return false
	}
	tr.again = true
	return true
}

// poll hands the bot's updates to b's handlers, one at a time, until ctx
// ends.
func (t *Telegram) poll(ctx context.Context, b *bot.Bot) {
	client := &http.Client{Timeout: pollWait + pollSlack}
	var offset int64 // 0: from the oldest Telegram has not forgotten
	delay := time.Duration(0)
	for ctx.Err() == nil {
		if delay > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
		}
		ups, err := t.getUpdates(ctx, client, offset)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			delay = min(max(2*delay, pollRetry), pollMaxRetry)
			logOf(t.Logger).Warn("telegram: cannot read the bot's updates", "err", err, "retry_in", delay)
			continue
		}
		delay = 0
		var failing time.Time // since when the update is handled again
		for i := 0; i < len(ups); {
			if ctx.Err() != nil {
				return // the lead is lost: the rest is the next poller's
			}
			tr := &updateTry{last: !failing.IsZero() && time.Since(failing) >= retryFor}
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handleFor)
			b.ProcessUpdate(context.WithValue(hctx, updateTryKey{}, tr), ups[i])
			cancel()
			if tr.again {
				if failing.IsZero() {
					failing = time.Now()
				}
				delay = min(max(2*delay, pollRetry), pollMaxRetry)
				select {
				case <-ctx.Done():
					return
				case <-time.After(delay):
				}
				continue
			}
			failing, delay = time.Time{}, 0
			offset = ups[i].ID + 1
			i++
		}
	}
}

// getUpdates asks for the updates from offset (0: the oldest kept),
// which confirms those before it.
func (t *Telegram) getUpdates(ctx context.Context, client *http.Client, offset int64) ([]*models.Update, error) {
	form := url.Values{"timeout": {strconv.Itoa(int(pollWait / time.Second))}, "allowed_updates": {`["message","callback_query"]`}}
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
	if !r.OK {
		return nil, fmt.Errorf("get updates: error %d: %s", r.ErrorCode, r.Description)
	}
	return r.Result, nil
}
