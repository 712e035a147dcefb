package channel

// The inbound side of Slack: Socket Mode, its envelopes, the presses and
// thread replies that answer (slack.go sends and edits the messages).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// Listen takes the presses and thread replies over Socket Mode until ctx
// ends, connecting again with backoff when Slack refuses or drops it.
func (s *Slack) Listen(ctx context.Context, a Answers) {
	var smOpts []socketmode.Option
	if s.dial != nil {
		smOpts = append(smOpts, socketmode.OptionDialer(&websocket.Dialer{NetDialContext: s.dial, HandshakeTimeout: 30 * time.Second}))
	}
	sm := socketmode.New(s.client(), smOpts...)
	s.learnBotUser(ctx)
	// The thread replies held for their note (holdAside) are this
	// Listen's, waited for when it ends.
	holds := &slackHolds{lead: ctx}
	ctx = context.WithValue(ctx, slackHoldsKey{}, holds)
	defer holds.wg.Wait()
	link := &slackLink{}
	var wg sync.WaitGroup
	// The library hands every envelope to sm.Events and, its buffer
	// full, waits for it to be taken: this drains them for as long as
	// Listen runs, each handed to the queue (slackQueue), which never
	// waits for a worker, so a press is read and acknowledged in time
	// however busy they are; it then waits for those handled.
	wg.Go(func() {
		q := newSlackQueue()
		defer q.wait()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-sm.Events:
				link.saw(ev)
				handle, drop := s.receive(ctx, sm, ev, a)
				if handle != nil && !q.run(slackOrderKey(ev), handle) {
					drop()
					s.warn("slack: too many events waiting to be handled; one is left for Slack to send again")
				}
			}
		}
	})
	defer wg.Wait()
	wait := slackFirstWait
	// refused is the wait while the app token is refused, 0 while it is
	// not.
	refused := time.Duration(0)
	for {
		run, stop := context.WithCancel(ctx)
		link.start(stop)
		err := sm.RunContext(run)
		stop()
		if ctx.Err() != nil {
			return
		}
		good, after, failed := link.end()
		if failed != nil {
			err = failed
		}
		if good {
			wait = slackFirstWait
		}
		if re := s.refusal(err, slackAppToken); re != nil {
			// Not tried again within seconds, nor told at each try: the
			// token must change, or the app be installed again.
			if !awaitRefused(ctx, &refused, s.refused(s.Logger).refused(s, re)) {
				return
			}
			continue
		}
		refused = 0
		wait = max(wait, after)
		s.warn("slack: Socket Mode connection failed", "err", s.redact(err), "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, slackMaxWait)
	}
}

// slackLink follows the runs of the Socket Mode client (sm.RunContext)
// of one Listen. The client connects again at once when Slack refreshes
// the connection, but waits on its own between failed tries, ever
// longer (hours after an outage of one): a failed try ends the run
// instead, and Listen waits its own wait, at most slackMaxWait, which
// starts again from slackFirstWait once a run had a connection Slack
// greeted (hello).
type slackLink struct {
	mu     sync.Mutex // held alone
	stop   context.CancelFunc
	good   bool
	failed error
	// after is how long Slack asked to wait (rate limited), 0 when it
	// did not.
	after time.Duration
}

// start follows a run that stop ends.
func (l *slackLink) start(stop context.CancelFunc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stop, l.good, l.failed, l.after = stop, false, nil, 0
}

// saw takes the client's event ev.
func (l *slackLink) saw(ev socketmode.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev.Type {
	case socketmode.EventTypeHello:
		l.good = true
	case socketmode.EventTypeConnectionError:
		if e, ok := ev.Data.(*slack.ConnectionErrorEvent); ok {
			l.failed = e.ErrorObj
			var rl *slack.RateLimitedError
			if errors.As(e.ErrorObj, &rl) {
				l.after = rl.RetryAfter
			}
		}
		if l.stop != nil {
			l.stop()
		}
	}
}

// end tells whether the run had a good connection, how long Slack asked
// to wait, and why its last try to connect failed (nil: none did).
func (l *slackLink) end() (good bool, after time.Duration, failed error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stop = nil
	return l.good, l.after, l.failed
}

// slackFirstWait and slackMaxWait are the first and the longest wait
// between tries to connect.
const (
	slackFirstWait = time.Second
	slackMaxWait   = 5 * time.Minute
)

// receive takes a Socket Mode event as it comes, before it waits its
// turn behind the events of its message or for a worker (slackQueue): a press's
// acknowledgement after ackWithin starts now (press). handle is its
// handling, nil when there is none; drop is called instead when it is
// not handled, and leaves it unacknowledged for Slack to send again.
func (s *Slack) receive(ctx context.Context, sm *socketmode.Client, ev socketmode.Event, a Answers) (handle, drop func()) {
	if cb, ok := ev.Data.(slack.InteractionCallback); ok && ev.Type == socketmode.EventTypeInteractive && cb.Type == slack.InteractionTypeBlockActions {
		return s.press(ctx, sm, ev, cb, a)
	}
	return func() { s.event(ctx, sm, ev, a) }, func() {}
}

// envelope is ev's acknowledgement, nil when it has no envelope.
func envelope(ctx context.Context, sm *socketmode.Client, ev socketmode.Event) *slackAck {
	if ev.Request == nil || ev.Request.EnvelopeID == "" {
		return nil
	}
	lead, id := ctx, ev.Request.EnvelopeID
	return newSlackAck(func() { _ = sm.AckCtx(lead, id, nil) })
}

// press receives the press cb (receive). One delivered again is
// acknowledged once its first delivery is, and not handled. Else its
// envelope is acknowledged once its answer is saved, or after ackWithin
// from now all the same, while it may still wait its turn (Slack shows
// the person an error past 3 s), the person told that their answer is
// not saved yet (slackUnsavedNote). One whose turn comes when the lead
// is lost, not acknowledged yet, is left to the instance Slack sends it
// to next; one acknowledged is handled to its end.
func (s *Slack) press(ctx context.Context, sm *socketmode.Client, ev socketmode.Event, cb slack.InteractionCallback, a Answers) (handle, drop func()) {
	if ctx.Err() != nil {
		return nil, nil
	}
	env := envelope(ctx, sm, ev)
	id := "press\x00" + cb.User.ID + "\x00" + cb.Container.ChannelID + "\x00" + cb.Container.MessageTs + "\x00" + cb.ActionTs
	for _, act := range cb.ActionCallback.BlockActions {
		id += "\x00" + act.ActionTs
	}
	if s.again(ctx, id, env) {
		env.finish()
		return nil, nil
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(context.WithValue(ctx, slackAckKey{}, env)), handleFor)
	var begun atomic.Bool // its handling has begun: it no longer waits for a worker
	saved := s.ackLate(hctx, env, cb, &begun)
	drop = func() {
		saved()
		cancel()
		s.forget(id, env)
	}
	handle = func() {
		begun.Store(true)
		if ctx.Err() != nil {
			saved() // its acknowledgement after ackWithin is sent, or never
			if env == nil || !env.acked() {
				drop()
				return
			}
		}
		defer cancel()
		defer env.finish()
		defer saved()
		s.pressed(hctx, cb, a, saved)
	}
	return handle, drop
}

// event handles one Socket Mode event other than a press (press), then
// acknowledges its envelope. A thread reply's is acknowledged once its
// answer is saved, or the person told why not, however long that takes
// (within handleFor): Slack sends it again meanwhile (nearly at once,
// then after a minute and after five), and a server killed before
// saving it has it sent again, to its restart or another instance. What
// is acknowledged is handled to its end, even when the lead is lost
// meanwhile. One that comes when the lead is lost already is left to
// the instance Slack sends it to next.
func (s *Slack) event(ctx context.Context, sm *socketmode.Client, ev socketmode.Event, a Answers) {
	if ctx.Err() != nil {
		return
	}
	env := envelope(ctx, sm, ev)
	defer env.finish()
	hctx, cancel := context.WithTimeout(context.WithoutCancel(context.WithValue(ctx, slackAckKey{}, env)), handleFor)
	defer cancel()
	switch ev.Type {
	case socketmode.EventTypeEventsAPI:
		e, ok := ev.Data.(slackevents.EventsAPIEvent)
		if !ok || e.Type != slackevents.CallbackEvent {
			return
		}
		if outer, ok := e.Data.(*slackevents.EventsAPICallbackEvent); ok && outer.EventID != "" && s.again(ctx, "event\x00"+outer.EventID, env) {
			return
		}
		if m, ok := e.InnerEvent.Data.(*slackevents.MessageEvent); ok {
			s.replied(hctx, m, a)
		}
	case socketmode.EventTypeConnectionError:
		// Said by Listen, which waits before it tries again (slackLink).
	case socketmode.EventTypeInvalidAuth:
		// Said by Listen, once, when the connection gives up.
		logOf(s.Logger).Debug("slack: the app token is refused")
	case socketmode.EventTypeConnected:
		s.refused(s.Logger).accepted(s, slackAppToken)
	}
}

// ackLate acknowledges the press cb's envelope env after ackWithin if
// it is not by then, and tells the presser their answer is not saved
// yet, unless the press answers nothing (a box ticked, a person not
// ours) or saved was called: why not, as begun says (slackBusyNote
// while it waits for a worker, slackUnsavedNote once it is being
// saved). saved stops that; it returns once a note on its way is told.
func (s *Slack) ackLate(ctx context.Context, env *slackAck, cb slack.InteractionCallback, begun *atomic.Bool) (saved func()) {
	if env == nil {
		return func() {}
	}
	answers := false
	for _, act := range cb.ActionCallback.BlockActions {
		answers = answers || act.Type != slack.ActionType(slack.METCheckboxGroups)
	}
	answers = answers && s.allowed(cb.User.ID)
	channel := cb.Container.ChannelID
	if channel == "" {
		channel = cb.Channel.ID
	}
	within := s.ackWithin
	opt.Default(&within, defaultAckWithin)
	var mu sync.Mutex // held alone
	done := false
	// Its goroutine is waited for by saved: mu is held while it tells.
	t := time.AfterFunc(within, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		done = true
		env.ack()
		if answers {
			note := slackBusyNote
			if begun.Load() {
				note = slackUnsavedNote
			}
			s.tell(ctx, channel, cb.User.ID, note)
		}
	})
	return func() {
		t.Stop()
		mu.Lock()
		done = true
		mu.Unlock()
	}
}

// again reports whether the event id was handled already, and
// remembers it: a redelivered reply or press must neither answer twice
// nor tell the person their answer was not taken. Its envelope env is
// acknowledged once the first one is (afterFirst): not while that one's
// answer is unsaved.
func (s *Slack) again(ctx context.Context, id string, env *slackAck) bool {
	s.handledMu.Lock()
	defer s.handledMu.Unlock()
	if first, ok := s.handled[id]; ok {
		logOf(s.Logger).Debug("slack: an event delivered again is ignored")
		s.afterFirst(ctx, env, first)
		return true
	}
	if s.handled == nil {
		s.handled = map[string]*slackAck{}
	}
	if len(s.handledOrder) >= maxHandled {
		delete(s.handled, s.handledOrder[0])
		s.handledOrder = s.handledOrder[1:]
	}
	s.handled[id] = env
	s.handledOrder = append(s.handledOrder, id)
	return false
}

// forget undoes again's note of the event id delivered as env, which is
// not handled: delivered again, it is handled then.
func (s *Slack) forget(id string, env *slackAck) {
	s.handledMu.Lock()
	defer s.handledMu.Unlock()
	if first, ok := s.handled[id]; ok && first == env {
		delete(s.handled, id)
		s.handledOrder = slices.DeleteFunc(s.handledOrder, func(h string) bool { return h == id })
	}
}

// allowed: the user is one the config names.
func (s *Slack) allowed(user string) bool { return user != "" && slices.Contains(s.Users, user) }

// tell shows text to user alone, in the conversation of the message.
func (s *Slack) tell(ctx context.Context, channel, user, text string) {
	if _, err := s.client().PostEphemeralContext(ctx, channel, user, slack.MsgOptionText(text, true)); err != nil {
		s.warn("slack: cannot reply to a press", "err", s.redact(err))
	}
}

// pressed answers with the capability of the question the pressed
// message asks; saved is called once the answer is saved.
func (s *Slack) pressed(ctx context.Context, cb slack.InteractionCallback, a Answers, saved func()) {
	channel, ts := cb.Container.ChannelID, cb.Container.MessageTs
	if channel == "" {
		channel, ts = cb.Channel.ID, cb.Message.Timestamp
	}
	for _, act := range cb.ActionCallback.BlockActions {
		if !s.allowed(cb.User.ID) {
			s.tell(ctx, channel, cb.User.ID, "You may not answer this question.")
			return
		}
		if act.Type == slack.ActionType(slack.METCheckboxGroups) {
			continue // a box ticked: Slack keeps it, and Send reads it (slack_multi.go)
		}
		q, asked, err := s.patientQuestion(ctx, slackKey{channel, ts})
		if err == nil && !asked {
			// A copy whose post never told its timestamp (slack_tag.go).
			q, asked, err = byTag(ctx, s, slackKey{channel, ts}, tagOfData(act.Value))
		}
		if err != nil {
			s.warn("slack: a press's question cannot be read", "err", err)
			s.tell(ctx, channel, cb.User.ID, "Your answer could not be taken just now; press again.")
			return
		}
		pending := asked && q.Gone == ""
		what, i, ok := tapOf(act.Value)
		if !ok || what == 't' || pending && i >= len(q.Labels) || asked && (what == 'a') == q.Multi {
			s.tell(ctx, channel, cb.User.ID, "Not an answer of ours.")
			continue
		}
		// What the press answers with: its option, or (Send) the
		// options ticked in the message's state.
		var chosen []string
		switch {
		case !asked || i >= len(q.Labels):
		case what == 'a':
			chosen = q.Labels[i : i+1]
		default:
			chosen = ticked(q.Labels, slackTicks(cb.BlockActionState, q.Labels))
		}
		if asked && !pending && len(chosen) > 0 && a.tookAlready(q, "slack:"+s.Name(), choiceContents(chosen)) {
			// This very press, taken before (delivered again to the
			// instance that took the connection over): it answered.
			continue
		}
		if !pending { // settled (its message updated), or asked before a restart
			s.tell(ctx, channel, cb.User.ID, "The question is no longer pending.")
			return
		}
		if len(chosen) == 0 {
			s.tell(ctx, channel, cb.User.ID, "Tick one or more answers first, then press Send.")
			continue
		}
		switch err := patiently(ctx, func() error { return a.ByCapAll(ctx, q.Cap, chosen) }); {
		case err == nil:
			saved()
		case a.tookAlready(q, "slack:"+s.Name(), choiceContents(chosen)):
			// This very press, taken before (delivered again after the
			// connection moved): it answered.
		case errors.Is(err, hub.ErrNotPending):
			s.tell(ctx, channel, cb.User.ID, "The question is no longer pending.")
		default:
			s.tell(ctx, channel, cb.User.ID, err.Error())
		}
	}
}

// slackUneditable: Slack has no such message to update (the person
// deleted it), or will not update it; tried again, the update fails the
// same way.
func slackUneditable(err error) bool {
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) {
		return false
	}
	return se.Err == "message_not_found" || se.Err == "cant_update_message" || se.Err == "edit_window_closed"
}

// replyKinds are the subtypes of a message a person writes in a thread:
// a plain one, one also sent to the channel, one with files (whose
// images answer with its text).
var replyKinds = []string{"", "thread_broadcast", "file_share"}

// replied answers the question whose thread a message is in, with its
// text. A reply in the thread of a question settled lately is told so:
// what a person wrote is never dropped without a word. The bot's own
// messages (that word among them) answer nothing.
func (s *Slack) replied(ctx context.Context, m *slackevents.MessageEvent, a Answers) {
	s.reply(ctx, m, a, false)
}

// reply is replied; held: the reply was held for its note already.
func (s *Slack) reply(ctx context.Context, m *slackevents.MessageEvent, a Answers, held bool) {
	if !slices.Contains(replyKinds, m.SubType) || m.BotID != "" || m.ThreadTimeStamp == "" || m.ThreadTimeStamp == m.TimeStamp ||
		!s.allowed(m.User) {
		return
	}
	notTaken := func(why string) {
		// Once across the cluster: Slack may send the event again to the
		// instance that holds the connection next.
		told := s.noteKey(slackKey{m.Channel, m.TimeStamp})
		tell, finish := tellOnce(ctx, s.notesOf(), logOf(s.Logger), told)
		if !tell {
			return
		}
		_, _, err := s.client().PostMessageContext(ctx, m.Channel, slack.MsgOptionTS(m.ThreadTimeStamp),
			slack.MsgOptionText("Not taken: "+why, true))
		if err != nil {
			s.warn("slack: cannot reply in the thread", "err", s.redact(err))
		}
		finish(err == nil)
	}
	q, ok, err := s.patientQuestion(ctx, slackKey{m.Channel, m.ThreadTimeStamp})
	if err == nil && !ok && s.threadOf(m) != othersThread {
		// A copy whose post never told its timestamp (slack_tag.go).
		q, ok, err = byTag(ctx, s, slackKey{m.Channel, m.ThreadTimeStamp}, s.parentTag(ctx, m.Channel, m.ThreadTimeStamp))
	}
	if err != nil {
		s.warn("slack: a reply's question cannot be read", "err", err)
		notTaken("the question it answers could not be looked up just now; reply again, or answer in the app.")
		return
	}
	if !ok {
		own := s.threadOf(m)
		if own != othersThread && !held && mayCome(s.notesOf()) && s.holdAside(ctx, m, a) {
			return // its note may be on its way: tried again meanwhile
		}
		if own == botsThread && notesLost(s.notesOf()) {
			notTaken(unnoted)
			return
		}
		if own == botsThread {
			notTaken("the message you replied to asks no pending question (it was answered, withdrawn or timed out, or is none); reply in a question's own thread, or answer in the app.")
		}
		return
	}
	token, mine := a.token(q.Room)
	if !mine {
		return
	}
	text := slackTyped(m.Text)
	typed := typedContents(q.Labels, q.Multi, false, text)
	if strings.TrimSpace(text) == "" {
		typed = nil
	}
	imgs := s.images(ctx, m)
	contents := imgs.with(typed)
	if q.Gone != "" {
		// This very reply, taken before (delivered again to another
		// instance), its images with it or left out.
		if len(contents) > 0 && a.tookAlready(q, "slack:"+m.User, contents) || len(typed) > 0 && a.tookAlready(q, "slack:"+m.User, typed) {
			return
		}
		notTaken("the question is no longer pending (answered, withdrawn or timed out).")
		return
	}
	if len(typed) == 0 && len(imgs.got) == 0 {
		why := "an answer is text or an image"
		if l := imgs.left(); l != "" {
			why += " (" + l + ")"
		}
		notTaken(why + ".")
		return
	}
	err = patiently(ctx, func() error { return a.ReplyWith(ctx, token, q.Kind, q.ID, contents, "Slack", m.User, "slack") })
	if errors.Is(err, hub.ErrNotAnOption) && len(typed) > 0 && len(contents) > len(typed) {
		// A question that takes only its options takes no image: the
		// option named answers, without them.
		contents = typed
		err = patiently(ctx, func() error { return a.ReplyWith(ctx, token, q.Kind, q.ID, contents, "Slack", m.User, "slack") })
		if err == nil {
			logOf(s.Logger).Info("slack: a reply's files left out: its question takes only its options", "id", q.ID)
		}
	}
	switch {
	case errors.Is(err, hub.ErrTooLarge):
		logOf(s.Logger).Warn("slack: a reply's answer is too large to save", "id", q.ID, "err", err)
		notTaken(tooLarge)
	case err != nil && !a.tookAlready(q, "slack:"+m.User, contents):
		notTaken(err.Error())
	}
}

// images are the images shared with a reply (its files[] that say they
// are images, or say nothing, and whose bytes are one), within the
// bounds, each downloaded with the bot token from the Web API's own host
// (or its files. host: Slack's files.slack.com), within photoTimeout in
// all.
func (s *Slack) images(ctx context.Context, m *slackevents.MessageEvent) *replyImages {
	var r replyImages
	if m.Message == nil || len(m.Message.Files) == 0 {
		return &r
	}
	ctx, cancel := context.WithTimeout(ctx, photoTimeout)
	defer cancel()
	for _, f := range m.Message.Files {
		if t := f.Mimetype; t != "" && t != "application/octet-stream" && !strings.HasPrefix(t, "image/") {
			r.files++
			continue
		}
		if !r.fits(f.Size) {
			continue
		}
		data, err := s.download(ctx, f.URLPrivate, r.room())
		if err != nil {
			s.warn("slack: a reply's file cannot be read", "id", f.ID, "err", s.redact(err))
			r.files++
			continue
		}
		r.add(data)
	}
	return &r
}

// download reads the file at address, at most n bytes, with the bot
// token: only from the Web API's host or its files. host, by https
// unless the API is reached by http (a test's), following no redirect.
func (s *Slack) download(ctx context.Context, address string, n int) ([]byte, error) {
	api, err := url.Parse(cmp.Or(s.APIURL, slack.APIURL))
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(address)
	if err != nil || u.Scheme != api.Scheme || u.User != nil || u.Host != api.Host && u.Host != "files."+api.Host {
		return nil, errors.New("its address is not on the Slack API's host")
	}
	// A file's, not a Web API method's (which a GET calls too): under
	// /files-pri/, climbing nowhere, asking nothing.
	if !strings.HasPrefix(u.Path, "/files-pri/") || path.Clean(u.Path) != u.Path || u.RawQuery != "" {
		return nil, errors.New("its address is no file's")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.BotToken)
	client := &http.Client{Transport: s.transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req) // #nosec G107 -- only the Slack API's own host
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("Slack answered %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(n)+1))
	if err != nil {
		return nil, err
	}
	return data, nil
}

// learnBotUser asks Slack for the bot's own user ID, once known kept;
// one not learnt leaves a thread's author unknown (threadOf).
func (s *Slack) learnBotUser(ctx context.Context) {
	if id, _ := s.botUser.Load().(string); id != "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, noteTimeout)
	defer cancel()
	r, err := s.client().AuthTestContext(ctx)
	if err != nil {
		logOf(s.Logger).Debug("slack: the bot's user not known", "err", s.redact(err))
		return
	}
	s.botUser.Store(r.UserID)
}

// whose thread a reply is in.
type threadAuthor int

const (
	unknownThread threadAuthor = iota
	botsThread
	othersThread
)

// threadOf tells whose message a reply's thread is of: the bot's, or
// another's, or unknown (the bot's user not learnt).
func (s *Slack) threadOf(m *slackevents.MessageEvent) threadAuthor {
	bot, _ := s.botUser.Load().(string)
	var parent string
	if m.Message != nil {
		parent = m.Message.ParentUserId
	}
	switch {
	case bot == "" || parent == "":
		return unknownThread
	case parent == bot:
		return botsThread
	}
	return othersThread
}

// slackHolds are the thread replies of one Listen held for their note:
// at most maxSlackHolds at a time, each for up to retryFor.
type slackHolds struct {
	// lead is Listen's context, which ends with the lead: a held reply
	// waits for its note no longer.
	lead context.Context
	wg   sync.WaitGroup
	mu   sync.Mutex // held alone
	n    int
}

type slackHoldsKey struct{}

// maxSlackHolds bounds the replies held at a time; past it a reply
// whose note is missing is handled at once.
const maxSlackHolds = 64

// holdAside tries the reply m again, in a goroutine of Listen's, until
// its question's note is there or retryFor has passed, and then handles
// it (told "Not taken" if it is still missing and the thread is the
// bot's) and acknowledges its envelope: held here, while the events
// after it are handled, and not acknowledged before it is taken, so that
// Slack sends it again if the server dies meanwhile. False when it
// cannot be held (none of Listen's, or too many held).
func (s *Slack) holdAside(ctx context.Context, m *slackevents.MessageEvent, a Answers) bool {
	h, ok := ctx.Value(slackHoldsKey{}).(*slackHolds)
	if !ok {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n >= maxSlackHolds {
		return false
	}
	h.n++
	env := ackOf(ctx)
	env.handOver()
	h.wg.Go(func() {
		defer func() {
			h.mu.Lock()
			h.n--
			h.mu.Unlock()
		}()
		k := slackKey{m.Channel, m.ThreadTimeStamp}
		_ = patiently(h.lead, func() error {
			_, ok, err := s.question(h.lead, k)
			switch {
			case err != nil:
				return fmt.Errorf("%w: %w", errNoteUnread, err)
			case !ok:
				return errNoteMissing
			}
			return nil
		})
		// Handled to its end, also when the lead is lost meanwhile:
		// another instance Slack sends it to finds it taken.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handleFor)
		defer cancel()
		s.reply(hctx, m, a, true)
		env.ack()
	})
	return true
}
