// Package push reaches a person's devices while no page of ours is open:
// Web Push (RFC 8030) with VAPID (RFC 8292), messages encrypted as RFC
// 8291's aes128gcm by github.com/SherClockHolmes/webpush-go. It subscribes
// to the hub's events: a question or report asked goes to every
// subscribed device of its token, with the person's answers as buttons,
// each with a capability to answer from the lock screen; a settled one
// closes the notifications it opened.
//
// Goroutines: one sender per subscription with something to send, which
// ends when idle; Close stops them and waits. The hub's events only
// queue (never block): a slow or failing push service delays nothing but
// its own device's pushes.
//
// What it keeps: the server's VAPID keys and the subscriptions (keys.go,
// subs.go) in the data directory; capabilities (srv/answercap) in memory.
package push

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"

	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/internal/owned"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Options configure a Pusher. Hub, Subscriptions and Keys are required.
type Options struct {
	Hub *hub.Hub
	// Caps makes the capabilities a notification answers with; nil: a
	// store of the Pusher's own.
	Caps          *answercap.Store
	Subscriptions Subscriptions
	Keys          Keys
	// Subject is the VAPID subject: how a push service may reach the
	// server's operator, an e-mail address or an https URL (default
	// agentassistant@localhost).
	Subject string
	// Client sends to the push services (default: 10 s per push, no
	// redirect followed, and connecting only to public addresses unless
	// AllowPrivateEndpoints).
	Client *http.Client
	// Tries is how many times a push is sent before it is given up
	// (default 4), Backoff the wait before the second (default 1s,
	// doubling).
	Tries   int
	Backoff time.Duration
	// AllowHTTP lets a subscription's endpoint be plain http (a local
	// push service in tests); push services are https.
	AllowHTTP             bool
	AllowPrivateEndpoints bool
	// Closes tells the instances of a cluster which one pushes a
	// question's close to a device (srv/cluster); nil: one instance.
	Closes Closes
	// TakeOver is how long a close left to the instance pushing its
	// question waits for it before this one takes it over (Closes): that
	// instance died or stopped mid-push. Default: longer than a push and
	// its backoff take.
	TakeOver time.Duration
	Logger   *slog.Logger
	Now      func() time.Time
}

// maxPerService bounds the pushes in flight to one push service (one
// host): a question for many devices then neither opens a connection
// for each nor takes every CPU from the inbox while they are encrypted,
// and a push service that hangs holds only its own.
const maxPerService = 4

// queueLen bounds what waits for one subscription; past it the oldest
// push is dropped (a notification the next one replaces anyway).
const queueLen = 32

// pushTimeout bounds one push.
const pushTimeout = 15 * time.Second

// idleFor: a sender with nothing to send for this long ends.
const idleFor = 30 * time.Second

// Pusher sends the pushes. Safe for concurrent use.
type Pusher struct {
	o     Options
	log   *slog.Logger
	caps  *answercap.Store
	unsub func()

	mu sync.Mutex // taken before nothing but the goroutines' leaf lock
	// subscribing makes a new subscription's look at the token's bound
	// and its keeping one step (Subscribe): apart, a burst all saw room.
	// Only the Subscriptions' own lock is taken under it.
	subscribing sync.Mutex
	senders     map[string]*sender
	slots       map[string]*slot // a push service's host → its pushes in flight, while it has one
	// goroutines are the senders: Close ends their Context (a wait, a
	// push in flight) and waits for them.
	goroutines owned.Group
}

// sender sends one subscription's pushes in order.
type sender struct {
	room string
	sub  Subscription
	q    chan job
	// closing counts the closes queued by question ID (Pusher.mu).
	closing map[string]int
	// early are the questions whose close closeIfSettled queued, newest
	// last (Pusher.mu): settled here, their event comes a moment later,
	// and queues no second close. Settled on another instance of a
	// cluster, it never comes here: past queueLen the oldest go.
	early []string
}

type job struct {
	msg   message
	topic string
	ttl   time.Duration
	// token of an ask: sent only while its question waits.
	token string
	// req is an ask's question, for the close that follows it when it
	// is settled as it is pushed (closeIfSettled) to name the choice.
	req hub.Request
	// owed: a close that Closes gave this instance to push.
	owed bool
}

// New starts following the hub's events.
func New(o Options) *Pusher {
	// webpush-go makes the subject a mailto: URL unless it is an https one.
	o.Subject = cmp.Or(strings.TrimPrefix(o.Subject, "mailto:"), "agentassistant@localhost")
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second, Transport: pushTransport(o.AllowPrivateEndpoints),
			CheckRedirect: noRedirects}
	}
	opt.Default(&o.Tries, 4)
	opt.Default(&o.Backoff, time.Second)
	// A push's own bound and its longest backoff, twice over.
	opt.Default(&o.TakeOver, 2*(pushTimeout+o.Backoff<<max(o.Tries-2, 0)))
	opt.Logger(&o.Logger)
	opt.Clock(&o.Now)
	if o.Caps == nil {
		o.Caps = answercap.New()
	}
	p := &Pusher{o: o, log: o.Logger, caps: o.Caps, senders: map[string]*sender{}, slots: map[string]*slot{}}
	p.unsub = o.Hub.Subscribe(p.event)
	if o.Closes != nil {
		p.goroutines.Go(p.sweep)
	}
	return p
}

// Close stops following the hub and the senders, and waits for them.
// Idempotent.
func (p *Pusher) Close() {
	p.unsub()
	p.goroutines.Close()
}

// event takes one of the hub's events; it queues, never waits.
func (p *Pusher) event(ev hub.Event) {
	room := store.Room(ev.Token)
	subs, err := p.o.Subscriptions.List(room)
	if err != nil {
		p.log.Error("push subscriptions unreadable", "err", err)
		return
	}
	if len(subs) == 0 {
		return
	}
	waiting := p.waiting(ev)
	switch ev.Kind {
	case hub.Asked:
		ttl := ev.AskedAt.Add(ev.Request.Timeout).Sub(p.o.Now())
		if ev.Request.Timeout <= 0 || ttl > 24*time.Hour {
			ttl = 24 * time.Hour
		}
		for _, s := range subs {
			m := askMessage(ev, room, s)
			if len(m.Actions) > 0 {
				// Good for its buttons' answers only: a question that takes
				// several options is not answered with one by a post of
				// its capability either.
				m.Cap = p.caps.Make(ev.Token, answercap.Cap{Room: room, Kind: ev.Request.Kind, ID: ev.Request.ID, Of: ev.Request.Shown(),
					Who: s.Device, WhoID: s.ID, Door: "push", Expires: ev.AskedAt.Add(ttl),
					Answers: append([]string{}, m.Actions...)}, p.o.Now())
				m.Answer = "/push/answer"
			}
			m.Waiting = waiting
			p.queue(room, s, job{msg: m, topic: m.Tag, ttl: ttl, token: ev.Token, req: ev.Request})
		}
	default:
		p.caps.Void(room, ev.Request.ID)
		for _, s := range subs {
			if answeredBy(ev, s) {
				// Its notification closed at the tap, and its service
				// worker counted one less then. A push now would close
				// nothing, and Chrome takes a push that leaves no
				// notification shown as a silent one: past a small
				// budget it shows its own "This site has been updated in
				// the background" (docs/push.md).
				continue
			}
			m := settledMessage(ev, room, s)
			m.Waiting = waiting
			p.queue(room, s, job{msg: m, topic: m.Tag, ttl: time.Hour})
		}
	}
}

// answeredBy reports whether s's notification answered ev's question:
// its button posted the answer with s's capability, whose reply is
// named "push:" and s's ID (answercap.Use; the name is saved with the
// answer, so an instance of a cluster that did not take it knows too).
func answeredBy(ev hub.Event, s Subscription) bool {
	return ev.Kind == hub.Answered && ev.Reply != nil && ev.Reply.ClientID == "push:"+s.ID
}

// waiting counts the requests of ev's token that wait for an answer
// after ev: the one asked is counted (it is shown before the event), the
// one settled is not (its outcome is told before it leaves the room).
func (p *Pusher) waiting(ev hub.Event) int {
	notes, _ := p.o.Hub.PendingMessages(ev.Token)
	n := 0
	for _, o := range notes {
		if o.Request.ID != ev.Request.ID {
			n++
		}
	}
	if ev.Kind == hub.Asked {
		n++
	}
	return n
}

// Resend pushes again the questions of tokens still waiting, to every
// device subscribed: after a restart (a kill -9 included) one saved just
// before the server stopped may not have been pushed. A device that has
// it gets it again under the same tag, which replaces its notification
// without a second alert.
func (p *Pusher) Resend(tokens []string) {
	now := p.o.Now()
	for _, tok := range tokens {
		notes, _ := p.o.Hub.PendingMessages(tok)
		for _, n := range notes {
			p.event(hub.Event{Kind: hub.Asked, Token: tok, Request: n.Request, AskedAt: n.AskedAt, At: now})
		}
	}
}

// queue hands j to s's sender, starting one if none runs.
func (p *Pusher) queue(room string, s Subscription, j job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sd := p.senders[senderKey(s)]
	if sd == nil {
		sd = &sender{room: room, sub: s, q: make(chan job, queueLen), closing: map[string]int{}}
		if !p.goroutines.Go(func() { p.run(sd) }) {
			return // closed
		}
		p.senders[senderKey(s)] = sd
	}
	if j.msg.Type == "settled" && sd.unearly(j.msg.ID) {
		return // its close is queued or sent already
	}
	p.put(sd, j)
}

// put queues j for sd, the oldest dropped while its queue is full.
// Pusher.mu is held.
func (p *Pusher) put(sd *sender, j job) {
	for {
		select {
		case sd.q <- j:
			sd.closes(j, 1)
			return
		default:
		}
		select {
		case old := <-sd.q: // the oldest goes
			sd.closes(old, -1)
			p.log.Warn("push dropped: its device's queue is full", "subscription", sd.sub.ID, "question", old.msg.ID)
		default:
		}
	}
}

// unearly forgets id's early close, reporting whether there was one.
// Pusher.mu is held.
func (sd *sender) unearly(id string) bool {
	n := len(sd.early)
	sd.early = slices.DeleteFunc(sd.early, func(e string) bool { return e == id })
	return len(sd.early) < n
}

// closes counts j in or out of sd's closes queued, if it is one.
// Pusher.mu is held.
func (sd *sender) closes(j job, by int) {
	if j.msg.Type != "settled" {
		return
	}
	if sd.closing[j.msg.ID] += by; sd.closing[j.msg.ID] <= 0 {
		delete(sd.closing, j.msg.ID)
	}
}

// senderKey names s's sender: a subscription renewed (Renew) keeps its
// ID with a new endpoint and keys, and gets a sender of its own; the old
// one's ends once idle.
func senderKey(s Subscription) string {
	return s.ID + " " + s.Endpoint + " " + s.P256dh + " " + s.Auth
}

// run sends sd's pushes in order until it is idle or the Pusher closes.
func (p *Pusher) run(sd *sender) {
	idle := time.NewTimer(idleFor)
	defer idle.Stop()
	done := p.goroutines.Done()
	for {
		select {
		case <-done:
			return
		case j := <-sd.q:
			p.mu.Lock()
			sd.closes(j, -1)
			p.mu.Unlock()
			if gone := p.send(sd, j); gone {
				p.forget(sd, true)
				return
			}
			idle.Reset(idleFor)
		case <-idle.C:
			if p.forget(sd, false) {
				return
			}
			idle.Reset(idleFor)
		}
	}
}

// forget ends sd's sender: now when gone (its subscription is removed),
// else only if nothing came meanwhile.
func (p *Pusher) forget(sd *sender, gone bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !gone && len(sd.q) > 0 {
		return false
	}
	if p.senders[senderKey(sd.sub)] == sd {
		delete(p.senders, senderKey(sd.sub))
	}
	return true
}

// errGone: the push service says the subscription is no more.
var errGone = errors.New("the subscription is gone")

// send delivers j, trying again with backoff; gone reports that the push
// service called the subscription gone (404, 410), which is then removed.
// An ask whose question was settled meanwhile is not tried (again): its
// device would be alerted to a question answered, and in a cluster the
// push that closes it may have gone out already, from another instance.
func (p *Pusher) send(sd *sender, j job) (gone bool) {
	// An ask settled already is not sent, nor, in a cluster, marked in
	// flight: a close left to this instance would be taken over
	// (takeOverLater) for nothing.
	if j.token != "" && !p.waits(j) {
		p.log.Info("push not sent: its question was settled meanwhile", "subscription", sd.sub.ID, "question", j.msg.ID, "tries", 0)
		return false
	}
	if c := p.o.Closes; c != nil && !j.owed {
		decide := c.Closing
		if j.token != "" {
			decide = c.Pushing
		}
		if ok, err := decide(p.goroutines.Context(), sd.room, j.msg.ID, sd.sub.ID); err != nil {
			p.log.Warn("push: the cluster's closes unreadable", "subscription", sd.sub.ID, "question", j.msg.ID, "err", err)
		} else if !ok {
			p.log.Info("push not sent: another instance closes its notification", "subscription", sd.sub.ID, "question", j.msg.ID, "type", j.msg.Type)
			if j.token == "" {
				p.takeOverLater(sd, j)
			}
			return false
		}
	}
	// An ask tried and given up may have reached the device all the
	// same (its answer lost): in a cluster, its close may be left to
	// this instance (Closes), which then pushes it.
	givenUp := func(tried bool) {
		if tried && j.token != "" && p.o.Closes != nil {
			p.closeIfSettled(sd, j)
		}
	}
	wait := p.o.Backoff
	for try := 1; ; try++ {
		if j.token != "" && try > 1 && !p.waits(j) {
			p.log.Info("push not sent: its question was settled meanwhile", "subscription", sd.sub.ID, "question", j.msg.ID, "tries", try-1)
			givenUp(true)
			return false
		}
		var marked atomic.Bool
		err := p.post(sd.sub, j, func() {
			if j.token == "" && p.o.Closes != nil {
				p.closed(sd, j)
				marked.Store(true)
			}
		})
		switch {
		case err == nil:
			p.log.Debug("push sent", "subscription", sd.sub.ID, "question", j.msg.ID, "type", j.msg.Type, "tries", try)
			if j.token != "" {
				p.closeIfSettled(sd, j)
			}
			if !marked.Load() { // a transport that tells no trace
				p.closed(sd, j)
			}
			return false
		case errors.Is(err, errGone):
			p.closed(sd, j)
			p.removeGone(sd)
			return true
		case errors.As(err, new(*sentWhole)):
			p.log.Info("push close sent, its answer not heard: taken as pushed", "subscription", sd.sub.ID, "question", j.msg.ID, "tries", try, "err", err)
			p.closed(sd, j)
			return false
		case try >= p.o.Tries || !retryable(err):
			p.log.Warn("push not delivered", "subscription", sd.sub.ID, "question", j.msg.ID, "tries", try, "err", err)
			givenUp(true)
			p.closed(sd, j)
			return false
		}
		select {
		case <-p.goroutines.Done():
			return false
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// waits reports whether the question of the ask j waits still.
func (p *Pusher) waits(j job) bool {
	_, _, waits := p.o.Hub.Waiting(j.token, j.msg.ID)
	return waits
}

// removeGone removes sd's subscription, which its push service called
// gone, unless it was renewed meanwhile: then its ID lives on at
// another endpoint. Whether it was is judged in the removal itself, on
// the subscriptions as stored: in a cluster another instance may have
// renewed it, which this one has not heard yet.
func (p *Pusher) removeGone(sd *sender) {
	removed, err := p.o.Subscriptions.Remove(sd.room, func(s Subscription) bool { return senderKey(s) == senderKey(sd.sub) })
	switch {
	case err != nil:
		p.log.Error("push subscription not removed", "subscription", sd.sub.ID, "err", err)
		return
	case !removed:
		p.log.Info("push endpoint gone: its subscription was renewed", "subscription", sd.sub.ID)
		return
	}
	p.log.Info("push subscription removed: the push service says it is gone", "subscription", sd.sub.ID, "device", sd.sub.Device)
}

// pushError is a push service's refusal.
type pushError struct {
	status int
	body   string
}

func (e *pushError) Error() string {
	return fmt.Sprintf("push service answered %d: %s", e.status, e.body)
}

// retryable: the push service may take it later (it was busy, or away).
func retryable(err error) bool {
	if errors.As(err, new(*sentWhole)) {
		return false
	}
	var pe *pushError
	if errors.As(err, &pe) {
		return pe.status == http.StatusTooManyRequests || pe.status >= 500
	}
	return !errors.Is(err, errPrivate) // else the network
}

// slot bounds the pushes in flight to one push service. It lives while
// a push to that service waits or is sent: the hosts are whatever the
// subscriptions name, and a token's devices can name new ones without
// end.
type slot struct {
	c     chan struct{}
	users int // pushes holding or waiting for c; guarded by Pusher.mu
}

// slot is the bound of the pushes in flight to endpoint's push service,
// held until release is called.
func (p *Pusher) slot(endpoint string) (c chan struct{}, release func()) {
	host := endpoint
	if u, err := url.Parse(endpoint); err == nil {
		host = u.Host
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	sl := p.slots[host]
	if sl == nil {
		sl = &slot{c: make(chan struct{}, maxPerService)}
		p.slots[host] = sl
	}
	sl.users++
	return sl.c, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if sl.users--; sl.users == 0 {
			delete(p.slots, host)
		}
	}
}

// post sends one push.
//
// sent, if not nil, is called once the request is written whole, before
// its answer: a close the push service has whole is taken as pushed
// (sentWhole), and is marked so in the cluster at once (closed), so that
// an instance killed as it waits for the answer leaves none to push
// again.
func (p *Pusher) post(s Subscription, j job, sent func()) error {
	sl, release := p.slot(s.Endpoint)
	defer release()
	select {
	case sl <- struct{}{}:
	case <-p.goroutines.Done():
		return errors.New("push: the server is closing")
	}
	defer func() { <-sl }()
	// Close ends a push in flight.
	ctx, cancel := context.WithTimeout(p.goroutines.Context(), pushTimeout)
	defer cancel()
	var (
		whole  atomic.Bool // the request went out whole
		once   sync.Once
		marked = make(chan struct{}) // sent has returned
	)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(w httptrace.WroteRequestInfo) {
		if w.Err != nil {
			return
		}
		whole.Store(true)
		if sent != nil {
			// Told apart from the transport's writer, which may be a
			// connection's shared by other pushes; post waits for it.
			once.Do(func() { go func() { defer close(marked); sent() }() })
		}
	}})
	defer func() {
		if whole.Load() && sent != nil {
			<-marked
		}
	}()
	resp, err := webpush.SendNotificationWithContext(ctx, j.msg.encode(),
		&webpush.Subscription{Endpoint: s.Endpoint, Keys: webpush.Keys{P256dh: s.P256dh, Auth: s.Auth}},
		&webpush.Options{HTTPClient: p.o.Client, Subscriber: p.o.Subject, Topic: j.topic,
			TTL: int(j.ttl / time.Second), Urgency: webpush.UrgencyHigh,
			VAPIDPublicKey: p.o.Keys.Public, VAPIDPrivateKey: p.o.Keys.Private})
	if err != nil {
		err = fmt.Errorf("push: %w", withoutPath(err, s.Endpoint))
		if j.token == "" && whole.Load() && timedOut(err) {
			// A close the push service took whole and did not answer in
			// time (or this process was stopped, SIGSTOP, as it waited):
			// most likely delivered. Pushed again, it would close nothing
			// on the device, and Chrome counts a push that leaves no
			// notification changed against its budget of silent ones.
			return &sentWhole{err}
		}
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return errGone
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	}
	return &pushError{status: resp.StatusCode, body: string(body)}
}

// withoutPath keeps an endpoint's path and query out of err, which is
// logged: they are the subscription's secret at its push service (FCM's
// registration token), which lets whoever holds it push to the device.
// The scheme and host stay, to tell which service failed.
func withoutPath(err error, endpoint string) error {
	u, perr := url.Parse(endpoint)
	if perr != nil {
		return &redacted{msg: "the push could not be sent to its endpoint", err: err}
	}
	host := u.Scheme + "://" + u.Host
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		ue.URL = host
	}
	if secret := strings.TrimPrefix(endpoint, host); len(secret) > 1 && strings.Contains(err.Error(), secret) {
		return &redacted{msg: strings.ReplaceAll(err.Error(), secret, "/…"), err: err}
	}
	return err
}

// redacted is an error told without a secret, still what it wraps.
type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// sentWhole is a close's push sent whole and not answered in time: not
// tried again (post).
type sentWhole struct{ err error }

func (e *sentWhole) Error() string {
	return e.err.Error() + " (sent whole: not tried again)"
}
func (e *sentWhole) Unwrap() error { return e.err }

// timedOut says err is a push's wait for its answer run out.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
