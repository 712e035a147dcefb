package channel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
)

// A credential refused. A service that refuses a channel's token or
// password (Telegram's 401, Slack's invalid_auth, ntfy's 401 or 403,
// SMTP's 535, IMAP's NO to LOGIN) refuses it at every try until a person
// changes the setting, or the service's side (a Slack app installed
// again, an ntfy user given the topic): trying again within seconds
// fixes nothing and fills the log. A refusal is its own state, apart
// from a service out of reach: the log says once which setting was
// refused and what the service said, the channel tries again every few
// minutes (refusedWait, doubling up to refusedMaxWait) with no line per
// try, and one line says when it is accepted again. The questions asked
// meanwhile are held for the channel and sent then (Manager).

const (
	// refusedWait is the first wait before a credential refused is
	// tried again; the waits double up to refusedMaxWait.
	refusedWait    = time.Minute
	refusedMaxWait = 10 * time.Minute
)

// nextRefusedWait is the wait after wait, for a credential refused.
func nextRefusedWait(wait time.Duration) time.Duration {
	return min(max(2*wait, refusedWait), refusedMaxWait)
}

// awaitRefused is a listener's wait after its credential was refused:
// the next of its growing waits (*wait), cut short once the credential
// is taken elsewhere (again, from refusals.refused); false when ctx
// ends first.
func awaitRefused(ctx context.Context, wait *time.Duration, again <-chan struct{}) bool {
	*wait = nextRefusedWait(*wait)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(*wait):
	case <-again:
	}
	return true
}

// RefusedError is a service's refusal of a channel's credential: a
// setting to fix, which trying again will not.
type RefusedError struct {
	// Channel names the channel ("telegram"); Setting, what to fix
	// ("[channels.telegram] bot_token"); Said, what the service answered
	// (never the secret); Hint, "" or what else may be wrong.
	Channel, Setting, Said, Hint string
}

func (e *RefusedError) Error() string { return e.Channel + ": credential refused: " + e.Fix() }

// Fix says what to fix, and why: "check SETTING (what the service
// said); HINT".
func (e *RefusedError) Fix() string {
	s := "check " + e.Setting + " (" + e.Said + ")"
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// refusedOf is the refusal err holds, nil when it holds none.
func refusedOf(err error) *RefusedError {
	var re *RefusedError
	if errors.As(err, &re) {
		return re
	}
	return nil
}

// Refusal is a credential of a channel refused now, as /health shows it.
type Refusal struct {
	Setting string    `json:"setting"`
	Said    string    `json:"said"`
	Hint    string    `json:"hint,omitempty"`
	Since   time.Time `json:"since"`
}

type refusalKey struct {
	c       Channel
	setting string
}

type refusal struct {
	Refusal
	name string
	// again is closed once the credential is accepted again: a side of
	// the channel waiting to try it again tries it at once.
	again chan struct{}
}

// refusals are the credentials of a Manager's channels refused now, told
// by the channels' senders and listeners alike (Telegram's bot token is
// refused to both): the log says once that one is refused, and once
// that it is accepted again, whichever side finds it.
type refusals struct {
	log *slog.Logger
	now func() time.Time

	mu sync.Mutex // held alone
	m  map[refusalKey]*refusal
}

func newRefusals(log *slog.Logger, now func() time.Time) *refusals {
	return &refusals{log: logOf(log), now: now, m: map[refusalKey]*refusal{}}
}

// refused notes that the service refuses e.Setting of c, logging it the
// first time; again is closed once it is accepted again.
func (r *refusals) refused(c Channel, e *RefusedError) (again <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := refusalKey{c, e.Setting}
	if f, ok := r.m[k]; ok {
		r.log.Debug("channel credential still refused", "channel", c.Name(), "setting", e.Setting, "said", e.Said)
		return f.again
	}
	f := &refusal{Refusal: Refusal{Setting: e.Setting, Said: e.Said, Hint: e.Hint, Since: r.now()}, name: c.Name(), again: make(chan struct{})}
	r.m[k] = f
	args := []any{"channel", c.Name(), "setting", e.Setting, "said", e.Said}
	if e.Hint != "" {
		args = append(args, "hint", e.Hint)
	}
	args = append(args, "retry_every", "up to "+refusedMaxWait.String())
	r.log.Error("channel credential refused: fix the setting (or the service's side); tried again every few minutes, no line until it is accepted, its questions kept", args...)
	return f.again
}

// accepted notes that setting of c is accepted (again): the log says so
// when it was refused. args are said with it.
func (r *refusals) accepted(c Channel, setting string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := refusalKey{c, setting}
	f, ok := r.m[k]
	if !ok {
		return
	}
	delete(r.m, k)
	close(f.again)
	r.log.Info("channel credential accepted again", append([]any{"channel", c.Name(), "setting", setting,
		"refused_for", r.now().Sub(f.Since).Round(time.Second).String()}, args...)...)
}

// of are the credentials of c refused now, by setting.
func (r *refusals) of(c Channel) []Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Refusal
	for k, f := range r.m {
		if k.c == c {
			out = append(out, f.Refusal)
		}
	}
	slices.SortFunc(out, func(a, b Refusal) int { return cmp.Compare(a.Setting, b.Setting) })
	return out
}

// refusing is a channel that tells its Manager's refusals what its
// listener finds.
type refusing interface{ useRefusals(*refusals) }

// serviceSaid is what a service answered with a status (HTTP's 401,
// SMTP's 535, IMAP's NO), with its words when it said some.
func serviceSaid(service, code, words string) string {
	s := service + " answered " + code
	if words != "" {
		s += ": " + words
	}
	return s
}

// State is a channel's state, as /health shows it: "ok", "down" (its
// last notice failed every try: the service out of reach) or "refused"
// (a credential of it refused: Refused names the settings).
type State struct {
	Channel string    `json:"channel"`
	State   string    `json:"state"`
	Refused []Refusal `json:"refused,omitempty"`
}

// States are the states of the channels, by name.
func (m *Manager) States() []State {
	var out []State
	for c, q := range m.queues {
		s := State{Channel: c.Name(), State: "ok", Refused: m.refusals.of(c)}
		switch {
		case len(s.Refused) > 0:
			s.State = "refused"
		case q.downNow.Load():
			s.State = "down"
		}
		out = append(out, s)
	}
	slices.SortStableFunc(out, func(a, b State) int { return cmp.Compare(a.Channel, b.Channel) })
	return out
}

// Refused counts the credentials refused now of each channel, by name:
// every channel routed has a count, 0 when none is.
func (m *Manager) Refused() map[string]int {
	out := map[string]int{}
	for c := range m.queues {
		out[c.Name()] += len(m.refusals.of(c))
	}
	return out
}

// A LoginChecker is a channel whose listener logs in with a credential
// of its own (Slack's app token, the mailbox's IMAP login), which
// sending does not try: -check-channels tries it with CheckLogin.
type LoginChecker interface {
	CheckLogin(ctx context.Context) error
}

// CheckLogin asks Slack for a Socket Mode connection with the app
// token: a *RefusedError when it is refused.
func (s *Slack) CheckLogin(ctx context.Context) error {
	_, _, err := s.client().StartSocketModeContext(ctx)
	if re := s.refusal(err, slackAppToken); re != nil {
		return re
	}
	if err != nil {
		return fmt.Errorf("slack: open a Socket Mode connection: %w", s.redact(err))
	}
	return nil
}

// CheckLogin logs in to the mailbox watched, when one is set: a
// *RefusedError when the login is refused.
func (e *Email) CheckLogin(ctx context.Context) error {
	if e.IMAPAddr == "" {
		return nil
	}
	conn, err := e.connect(ctx, e.IMAPAddr)
	if err != nil {
		return fmt.Errorf("email: connect to IMAP: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	c, err := e.imapClient(conn, &imapclient.Options{TLSConfig: e.tlsConfig(e.IMAPAddr)})
	if err != nil {
		return fmt.Errorf("email: connect to IMAP: %w", err)
	}
	defer func() { _ = c.Close() }()
	if err := c.Login(e.IMAPUser, e.IMAPPassword).Wait(); err != nil {
		if re := e.imapRefusal(err); re != nil {
			return re
		}
		if gerr := c.WaitGreeting(); gerr != nil {
			// The connection failed before the server greeted (TLS
			// answered in the clear): why, not the closed connection
			// LOGIN met after.
			err = gerr
		}
		return fmt.Errorf("email: log in to IMAP: %w%s", e.redact(err), tlsHint(err, "143", "993"))
	}
	_ = c.Logout().Wait()
	return nil
}
