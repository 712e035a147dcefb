package channel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Slack sends questions to a Slack channel or a person's DM through an
// app's bot, with github.com/slack-go/slack over Socket Mode (no public
// address needed): a question as a Block Kit message with its answers
// (its own options, else the quick replies) as buttons; a press of one, or a reply in the message's thread (text),
// answers it. When the question is settled anywhere the message is
// updated to say so and its buttons removed. Answers count only from the
// Slack users it is configured for.
type Slack struct {
	// BotToken (xoxb-…) posts and updates messages; AppToken (xapp-…,
	// with connections:write) opens the Socket Mode connection. Never
	// logged.
	BotToken, AppToken string
	// Channel is where questions go: a channel ID, or a user ID for that
	// person's DM with the app.
	Channel string
	// Users are the Slack user IDs whose presses and replies answer.
	Users []string
	// APIURL is the Web API's address (default Slack's).
	APIURL string
	Logger *slog.Logger

	// transport and dial carry the calls to the Web API and the Socket
	// Mode connection (nil: the defaults): a test's in-memory network.
	transport http.RoundTripper
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	// ackWithin bounds the wait for a press's handling before its
	// envelope is acknowledged all the same (0: defaultAckWithin).
	ackWithin time.Duration

	once sync.Once
	api  *slack.Client
	// botUser is the bot's own user ID (auth.test), "" until known: a
	// thread of one of its messages is told from another's by it.
	botUser atomic.Value // string

	mu   sync.Mutex              // held alone
	sent map[string]slackMessage // room + "\x00" + request ID → its message, for the update
	// notes: a message → the question it asks (asked), pending or
	// settled lately (a reply in its thread is then told it came too
	// late), for whichever instance holds the Socket Mode connection.
	notes noteHolder

	// refused are the credentials refused now (refused.go): its
	// Manager's, told what the Socket Mode connection finds.
	refused refusalHolder

	// handled are the events and presses taken lately, oldest first in
	// handledOrder: Socket Mode delivers one again when its
	// acknowledgement was late. Touched only by Listen's event goroutine.
	handled      map[string]*slackAck
	handledOrder []string
}

// defaultAckWithin: a press's envelope is acknowledged once its answer
// is saved (or the person told why not), or after this long, whichever
// comes first: Slack shows the person an error when a press is not
// acknowledged within 3 s (docs.slack.dev/interactivity/handling-user-interaction).
// One acknowledged before it is saved tells the person so
// (slackUnsavedNote) and is handled to its end all the same. A thread
// reply waits for its answer however long: Slack sends it again
// meanwhile, and after a restart.
const defaultAckWithin = 2 * time.Second

// maxHandled bounds the events remembered against redelivery (Slack
// tries again three times within minutes).
const maxHandled = 1024

// slackKey names a message: its conversation and timestamp.
type slackKey struct{ channel, ts string }

type slackMessage struct {
	slackKey
	text string
	// more are its other copies: one posted before a restart whose
	// timestamp never came back, learnt from a press or a reply
	// (slack_tag.go), updated with it.
	more []slackKey
}

// Name is "slack".
func (*Slack) Name() string { return "slack" }

// lead: one instance at a time holds the app's Socket Mode connection
// (Slack spreads the events over every connection open).
func (s *Slack) lead() string { return leadName("slack", s.AppToken) }

func (s *Slack) useNotes(n Notes) { s.notes.use(n) }
func (s *Slack) notesOf() Notes   { return s.notes.get() }

// noteKey names the note of the message k. Message timestamps are
// unique within a conversation; the app token's hash keeps two apps'
// apart.
func (s *Slack) noteKey(k slackKey) string { return s.lead() + "." + k.channel + "." + k.ts }

// redact keeps the tokens out of an error.
func (s *Slack) redact(err error) error { return redact(err, s.BotToken, s.AppToken) }

func (s *Slack) warn(msg string, args ...any) { logOf(s.Logger).Warn(msg, args...) }

// The settings of Slack's tokens.
const (
	slackBotToken = "[channels.slack] bot_token"
	slackAppToken = "[channels.slack] app_token"
)

// slackRefusedCodes are the errors Slack answers a token it will not
// take with: trying it again will not change them.
var slackRefusedCodes = []string{"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}

// refusal is err as the refusal of the token of setting, nil when it is
// none.
func (s *Slack) refusal(err error, setting string) *RefusedError {
	if err == nil {
		return nil
	}
	said := err.Error()
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		said = se.Err
	}
	code, _, _ := strings.Cut(said, " ")
	if !slices.Contains(slackRefusedCodes, code) {
		return nil
	}
	re := &RefusedError{Channel: "slack", Setting: setting, Said: "Slack answered " + s.redact(errors.New(said)).Error()}
	switch {
	case code == "token_revoked" || code == "account_inactive":
		re.Hint = "install the app in the workspace again (OAuth & Permissions), and copy the token it shows"
	case setting == slackAppToken:
		re.Hint = "the app-level token (xapp-…) is under Basic Information, App-Level Tokens, with connections:write"
	default:
		re.Hint = "the bot token (xoxb-…) is under OAuth & Permissions, Bot User OAuth Token"
	}
	return re
}

func (s *Slack) useRefusals(r *refusals) { s.refused.use(r) }

// client makes the Web API client once.
func (s *Slack) client() *slack.Client {
	s.once.Do(func() {
		opts := []slack.Option{slack.OptionAppLevelToken(s.AppToken), slack.OptionHTTPClient(&http.Client{Timeout: 30 * time.Second, Transport: s.transport})}
		if s.APIURL != "" {
			opts = append(opts, slack.OptionAPIURL(strings.TrimRight(s.APIURL, "/")+"/"))
		}
		s.api = slack.New(s.BotToken, opts...)
	})
	return s.api
}

// slackText is a plain-text object: an agent's text cannot mention
// anyone (<!channel>) or format itself as Slack's markup.
func slackText(text string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.PlainTextType, text, false, false)
}

// slackMarkup is a mrkdwn object of text made by slackMrkdwn (or
// escaped by slackEscape), verbatim: Slack links no name or address in
// it that it was not given as a link.
func slackMarkup(text string) *slack.TextBlockObject {
	return slack.NewTextBlockObject(slack.MarkdownType, text, false, true)
}

// maxSlackQuestion bounds a question's mrkdwn in its message: a
// section's text holds 3,000 characters, with the title, options and
// hint besides.
const maxSlackQuestion = 2000

// maxSlackSection is what a section's text holds, in characters (of
// its mrkdwn as sent, escapes and all; counted here in bytes, never
// fewer).
const maxSlackSection = 3000

// Parts of a question's message, as escaped mrkdwn: its title, its
// options' lines together, each kept within these bytes.
const (
	maxSlackTitle   = 300
	maxSlackOptions = 1200
)

// slackQuestion is a question's text md as mrkdwn within room bytes
// (at most maxSlackQuestion; cut says it was cut): escaping lengthens
// it, so a text full of < is cut shorter.
func slackQuestion(md string, room int) (out string, cut bool) {
	md = withoutDataImages(md)
	for n := min(maxSlackQuestion, room); n >= 64; n = n * 2 / 3 {
		var part string
		part, cut = clipText(md, n)
		if out = slackMrkdwn(part); len(out) <= room {
			return out, cut
		}
	}
	return "", md != ""
}

// slackSettledLine ends a settled question's message: its title.
func slackSettledLine(title string) string { return "\n\n— " + slackEscClip(title, maxSlackTitle) }

// Send delivers n: a question with its buttons, or the update of a
// question's message once it is settled.
func (s *Slack) Send(ctx context.Context, n Notice) error {
	api := s.client()
	key := store.Room(n.Token) + "\x00" + n.Request.ID
	if n.Kind != hub.Asked {
		room := store.Room(n.Token)
		s.mu.Lock()
		m, ok := s.sent[key]
		s.mu.Unlock()
		notes := s.notesOf()
		if !ok {
			// Settled on another instance than the one that posted it
			// (an outcome is told where it is written): its message is
			// noted.
			var err error
			if m, ok, err = s.sentNoted(ctx, room, n.Request.ID); err != nil || !ok {
				return err
			}
		}
		s.settleTag(ctx, room, n)
		for _, k := range append([]slackKey{m.slackKey}, m.more...) {
			// Settled: its presses and replies answer nothing now, and
			// a reply in its thread is told so; the one delivered again
			// (the connection moved) is told from another by the
			// outcome, so the note keeps the labels.
			gone, found, err := getAsked(ctx, notes, s.noteKey(k))
			if err != nil || !found {
				gone = asked{Room: room, Kind: n.Request.Kind, ID: n.Request.ID}
			}
			gone.Gone = title(n)
			if err := putAsked(ctx, notes, s.noteKey(k), gone, n.At.Add(goneFor)); err != nil {
				return fmt.Errorf("slack: %w", err)
			}
			text := m.text + slackSettledLine(title(n))
			_, _, _, err = api.UpdateMessageContext(ctx, k.channel, k.ts, slack.MsgOptionText(title(n), true),
				slack.MsgOptionBlocks(slack.NewSectionBlock(slackMarkup(text), nil, nil)))
			switch {
			case err == nil:
			case slackUneditable(err):
				// Deleted by the person (a copy posted again, most
				// likely): nothing to update, now or later; the others
				// are updated.
				logOf(s.Logger).Info("slack: a settled question's message is gone, not updated", "id", n.Request.ID, "err", s.redact(err))
			case s.refusal(err, slackBotToken) != nil:
				return s.refusal(err, slackBotToken)
			default:
				return fmt.Errorf("slack: update the question's message: %w", s.redact(err))
			}
		}
		s.mu.Lock()
		delete(s.sent, key)
		s.mu.Unlock()
		if err := deleteNote(ctx, notes, s.sentKey(room, n.Request.ID)); err != nil {
			s.warn("slack: a settled question's note not forgotten", "err", err)
		}
		return nil
	}
	room := store.Room(n.Token)
	s.recall(ctx, key, room, n.Request.ID)
	s.mu.Lock()
	_, done := s.sent[key] // a retry after the post went through
	s.mu.Unlock()
	if done {
		return nil
	}
	// A copy may have been posted before (a post whose answer never
	// came: the server died, or the call failed after Slack posted it):
	// this one says so, and that one answers too (slack_tag.go).
	tag := tagOf(room, n.Request.ID)
	var before tagNote
	again, _ := getJSON(ctx, s.notesOf(), s.tagKey(tag), &before)
	// shown stays once the question is settled; the hint goes with the
	// buttons. A section's text holds 3,000 characters.
	// The question has what the rest leaves of the section, once settled
	// too (the hint then gives way to a line saying so).
	head := slackEscClip(title(n), maxSlackTitle) + "\n\n"
	var listed string
	if opts, some := described(n.Request); some {
		listed = "\n"
		for _, o := range opts {
			listed += "\n• " + slackEscClip(o.line(), maxSlackOptions/len(opts)-len("\n• "))
		}
	}
	hint := "\n\n(Press an answer, or reply in this message's thread.)"
	multi := multiOf(n.Request)
	if multi {
		hint = "\n\n(Tick the answers, then press Send; or reply in this message's thread.)"
	}
	if again {
		hint = slackAgainLine + hint
	}
	const cutMark = "\n…\n\n(" + restInApp + ")"
	fits := maxSlackSection - len(head+listed+cutMark) - max(len(hint), len(slackSettledLine(""))+maxSlackTitle)
	question, cut := slackQuestion(n.Request.Text, fits)
	shown := head + question
	if cut {
		shown += cutMark
	}
	shown += listed
	text := shown + hint
	// The question's own options when it offers some, else the quick
	// replies; a button's text is at most 75 characters (Block Kit's
	// bound), its value only its index.
	labels, _ := buttonsOf(n.Request)
	var buttons []slack.BlockElement
	if multi {
		buttons = slackTickElements(labels, tag)
	}
	for i, label := range labels {
		if multi {
			break
		}
		buttons = append(buttons, slack.NewButtonBlockElement("answer-"+strconv.Itoa(i), "a:"+strconv.Itoa(i)+":"+tag, slackText(Clip(label, 75))))
	}
	q := asked{Room: room, Kind: n.Request.Kind, ID: n.Request.ID, Cap: n.Cap, Labels: labels, Multi: multi}
	until := expiresOf(n.Event)
	// Noted before it is posted: a message whose timestamp never comes
	// back is still told by the tag its buttons carry.
	if err := putJSON(ctx, s.notesOf(), s.tagKey(tag), tagNote{asked: q, Shown: shown, Until: until}, until); err != nil {
		s.warn("slack: a question not noted before it is posted; a copy whose timestamp never comes back answers nothing", "err", err)
	}
	channel, ts, err := api.PostMessageContext(ctx, s.Channel, slack.MsgOptionText(title(n), true),
		slack.MsgOptionBlocks(slack.NewSectionBlock(slackMarkup(text), nil, nil), slack.NewActionBlock("answers", buttons...)))
	if re := s.refusal(err, slackBotToken); re != nil {
		return re
	}
	if err != nil {
		return fmt.Errorf("slack: post the question: %w", s.redact(err))
	}
	s.track(ctx, key, slackMessage{slackKey: slackKey{channel, ts}, text: shown}, q, until)
	return nil
}

// track notes that the message m asks q, and keeps m for the update
// once q is settled. A note the store cannot take just now is written
// once it can (laterNotes); one that cannot even be kept for that is
// told in the log: a press then says the question is no longer pending.
func (s *Slack) track(ctx context.Context, key string, m slackMessage, q asked, until time.Time) {
	s.mu.Lock()
	if s.sent == nil {
		s.sent = map[string]slackMessage{}
	}
	if _, ok := s.sent[key]; !ok && len(s.sent) >= maxTracked {
		for k := range s.sent { // forget one: its message then stays as it was
			delete(s.sent, k)
			break
		}
	}
	if was, ok := s.sent[key]; ok && was.slackKey != m.slackKey && !slices.Contains(was.more, m.slackKey) {
		// Another copy, learnt (slack_tag.go): updated with the first.
		was.more = append(was.more, m.slackKey)
		m = was
	}
	s.sent[key] = m
	s.mu.Unlock()
	sn := slackSentNote{Channel: m.channel, TS: m.ts, Text: m.text}
	for _, k := range m.more {
		sn.More = append(sn.More, [2]string{k.channel, k.ts})
	}
	// Kept past the question's time: its update may be owed (owed.go).
	if err := putJSON(ctx, s.notesOf(), s.sentKey(q.Room, q.ID), sn, until.Add(owedFor)); err != nil {
		s.warn("slack: a question's message not noted; another instance will not update it", "err", err)
	}
	for _, k := range append([]slackKey{m.slackKey}, m.more...) {
		if err := putAsked(ctx, s.notesOf(), s.noteKey(k), q, until); err != nil {
			s.warn("slack: what a message asks not noted; a press or reply to it answers nothing", "err", err)
		}
	}
}

// slackSentNote is a question's message, for the instance that hears it
// is settled to update it.
type slackSentNote struct {
	Channel string `json:"c"`
	TS      string `json:"ts"`
	Text    string `json:"t"`
	// More are its other copies, learnt: conversation and timestamp.
	More [][2]string `json:"m,omitempty"`
}

// sentKey names the note of the message of question id of room: apart
// from noteKey's.
func (s *Slack) sentKey(room, id string) string { return "sent." + s.lead() + "." + room + "." + id }

// sentNoted is the message of question id of room, as noted.
func (s *Slack) sentNoted(ctx context.Context, room, id string) (slackMessage, bool, error) {
	var sn slackSentNote
	ok, err := getJSON(ctx, s.notesOf(), s.sentKey(room, id), &sn)
	if err != nil || !ok {
		return slackMessage{}, false, err
	}
	m := slackMessage{slackKey: slackKey{sn.Channel, sn.TS}, text: sn.Text}
	for _, k := range sn.More {
		m.more = append(m.more, slackKey{k[0], k[1]})
	}
	return m, true, nil
}

// question is what the message k asks, if it is one of ours, pending
// or settled lately (Gone says why).
func (s *Slack) question(ctx context.Context, k slackKey) (asked, bool, error) {
	return getAsked(ctx, s.notesOf(), s.noteKey(k))
}

// patientQuestion is question, read again while its note is out of
// reach (patiently).
func (s *Slack) patientQuestion(ctx context.Context, k slackKey) (q asked, ok bool, err error) {
	err = patiently(ctx, func() error {
		if q, ok, err = s.question(ctx, k); err != nil {
			return fmt.Errorf("%w: %w", errNoteUnread, err)
		}
		return nil
	})
	return q, ok, err
}

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
	var wg sync.WaitGroup
	// The library hands every envelope to sm.Events and waits for it to
	// be taken: this drains them for as long as Listen runs.
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-sm.Events:
				s.event(ctx, sm, ev, a)
			}
		}
	})
	defer wg.Wait()
	wait := time.Second
	// refused is the wait while the app token is refused, 0 while it is
	// not.
	refused := time.Duration(0)
	for {
		err := sm.RunContext(ctx)
		if ctx.Err() != nil {
			return
		}
		if re := s.refusal(err, slackAppToken); re != nil {
			// Not tried again within seconds, nor told at each try: the
			// token must change, or the app be installed again.
			if !awaitRefused(ctx, &refused, s.refused.get(s.Logger).refused(s, re)) {
				return
			}
			continue
		}
		refused = 0
		s.warn("slack: Socket Mode connection failed", "err", s.redact(err), "retry_in", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Minute)
	}
}

// event handles one Socket Mode event, then acknowledges its envelope.
// A thread reply's is acknowledged once its answer is saved, or the
// person told why not, however long that takes (within handleFor): Slack
// sends it again meanwhile (nearly at once, then after a minute and
// after five), and a server killed before saving it has it sent again,
// to its restart or another instance. A press's is acknowledged after
// ackWithin all the same (Slack shows the person an error past 3 s),
// and the person told that their answer is not saved yet
// (slackUnsavedNote). What is acknowledged is handled to its end, even
// when the lead is lost meanwhile. One that comes when the lead is lost
// already is left to the instance Slack sends it to next.
func (s *Slack) event(ctx context.Context, sm *socketmode.Client, ev socketmode.Event, a Answers) {
	if ctx.Err() != nil {
		return
	}
	var env *slackAck
	if ev.Request != nil && ev.Request.EnvelopeID != "" {
		lead, id := ctx, ev.Request.EnvelopeID
		env = newSlackAck(func() { _ = sm.AckCtx(lead, id, nil) })
		defer env.finish()
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(context.WithValue(ctx, slackAckKey{}, env)), handleFor)
	defer cancel()
	switch ev.Type {
	case socketmode.EventTypeInteractive:
		if cb, ok := ev.Data.(slack.InteractionCallback); ok && cb.Type == slack.InteractionTypeBlockActions {
			id := "press\x00" + cb.User.ID + "\x00" + cb.Container.ChannelID + "\x00" + cb.Container.MessageTs + "\x00" + cb.ActionTs
			for _, act := range cb.ActionCallback.BlockActions {
				id += "\x00" + act.ActionTs
			}
			if s.again(ctx, id, env) {
				return
			}
			saved := s.ackLate(hctx, env, cb)
			defer saved()
			s.pressed(hctx, cb, a, saved)
		}
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
		if e, ok := ev.Data.(*slack.ConnectionErrorEvent); ok {
			s.warn("slack: cannot connect", "err", s.redact(e.ErrorObj), "attempt", e.Attempt)
		}
	case socketmode.EventTypeInvalidAuth:
		// Said by Listen, once, when the connection gives up.
		logOf(s.Logger).Debug("slack: the app token is refused")
	case socketmode.EventTypeConnected:
		s.refused.get(s.Logger).accepted(s, slackAppToken)
	}
}

// ackLate acknowledges the press cb's envelope env after ackWithin if
// it is not by then, and tells the presser their answer is not saved
// yet, unless the press answers nothing (a box ticked, a person not
// ours) or saved was called. saved stops that; it returns once a note
// on its way is told.
func (s *Slack) ackLate(ctx context.Context, env *slackAck, cb slack.InteractionCallback) (saved func()) {
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
	if within <= 0 {
		within = defaultAckWithin
	}
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
			s.tell(ctx, channel, cb.User.ID, slackUnsavedNote)
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
			q, asked, err = s.byTag(ctx, slackKey{channel, ts}, tagOfData(act.Value))
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
			chosen = slackTicked(cb.BlockActionState, q.Labels)
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
// a plain one, one also sent to the channel, one with a file (whose text
// answers; the file is not carried).
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
		q, ok, err = s.byTag(ctx, slackKey{m.Channel, m.ThreadTimeStamp}, s.parentTag(ctx, m.Channel, m.ThreadTimeStamp))
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
		if own == botsThread {
			notTaken("the message you replied to asks no pending question (it was answered, withdrawn or timed out, or is none); reply in a question's own thread, or answer in the app.")
		}
		return
	}
	token, mine := a.token(q.Room)
	if !mine {
		return
	}
	contents := typedContents(q.Labels, q.Multi, false, m.Text)
	if q.Gone != "" {
		if a.tookAlready(q, "slack:"+m.User, contents) {
			return // this very reply, taken before (delivered again to another instance)
		}
		notTaken("the question is no longer pending (answered, withdrawn or timed out).")
		return
	}
	if strings.TrimSpace(m.Text) == "" {
		notTaken("an answer is text.")
		return
	}
	err = patiently(ctx, func() error { return a.ReplyWith(ctx, token, q.Kind, q.ID, contents, "Slack", m.User, "slack") })
	if err != nil && !a.tookAlready(q, "slack:"+m.User, contents) {
		notTaken(err.Error())
	}
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
