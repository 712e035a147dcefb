package channel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slack-go/slack"

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

	// sent: a question's message, and its other copies (one posted
	// before a restart whose timestamp never came back, learnt from a
	// press or a reply, slack_tag.go), updated with it.
	sent sentQuestions[[]chatMsg[slackKey]]
	// answering: its notes, a message → the question it asks (asked),
	// pending or settled lately (a reply in its thread is then told it
	// came too late), for whichever instance holds the Socket Mode
	// connection; and the credentials refused now, told what that
	// connection finds.
	answering

	// handled are the events and presses taken lately, oldest first in
	// handledOrder: Socket Mode delivers one again when its
	// acknowledgement was late. Guarded by handledMu, held alone: the
	// events of Listen are handled side by side (slackQueue).
	handledMu    sync.Mutex
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

// Name is "slack".
func (*Slack) Name() string { return "slack" }

// lead: one instance at a time holds the app's Socket Mode connection
// (Slack spreads the events over every connection open).
func (s *Slack) lead() string { return leadName("slack", s.AppToken) }

func (s *Slack) logger() *slog.Logger                        { return logOf(s.Logger) }
func (s *Slack) sentOf() *sentQuestions[[]chatMsg[slackKey]] { return &s.sent }

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

// channelHint is how to fix [channels.slack] channel when err is
// Slack's word that the channel is not the bot's to post in.
func channelHint(err error) string {
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "not_in_channel" && se.Err != "channel_not_found" {
		return ""
	}
	return " (check [channels.slack] channel: a channel's ID (C…) is at the foot of its details, and the bot must be in it: /invite @the-app there; a user's ID (U…) needs the app's Messages tab on)"
}

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

// maxSlackButton is what a button's or a checkbox's text holds, in
// characters (Block Kit's bound; counted here in bytes, never fewer).
const maxSlackButton = 75

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
	room := store.Room(n.Token)
	if n.Kind != hub.Asked {
		msgs, err := settledMsgs(ctx, s, n, room)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			// Every copy says what the first said.
			text := msgs[0].text + slackSettledLine(title(n))
			_, _, _, err = api.UpdateMessageContext(ctx, m.key.channel, m.key.ts, slack.MsgOptionText(title(n), true),
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
		forgetSent(ctx, s, room, n.Request.ID)
		return nil
	}
	recall(ctx, s, room, n.Request.ID)
	if _, done := s.sent.get(questionKey(room, n.Request.ID)); done {
		return nil // a retry after the post went through
	}
	// A copy may have been posted before (a post whose answer never
	// came: the server died, or the call failed after Slack posted it):
	// this one says so, and that one answers too (slack_tag.go).
	tag := n.Seq
	var before tagNote
	again, _ := getJSON(ctx, s.notesOf(), s.tagKey(tag), &before)
	// shown stays once the question is settled; the hint goes with the
	// buttons. A section's text holds 3,000 characters.
	// The question has what the rest leaves of the section, once settled
	// too (the hint then gives way to a line saying so).
	head := slackEscClip(title(n), maxSlackTitle) + "\n\n"
	var listed string
	// Listed when they say more than the buttons: descriptions, or a
	// label cut on its button (two cut alike would read the same).
	if opts, some := described(n.Request); some || cutOnButton(opts, maxSlackButton) {
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
	cutMark := "\n…\n\n(" + restInApp + ")"
	if u, err := url.Parse(appLink(n)); err == nil && u.String() != "" {
		cutMark = "\n…\n\n(<" + slackURL(u) + "|" + restInApp + ">)"
	}
	fits := maxSlackSection - len(head+listed+cutMark) - max(len(hint), len(slackSettledLine(""))+maxSlackTitle)
	question, cut := slackQuestion(n.Request.Text, fits)
	shown := head + question
	if cut {
		shown += cutMark
	}
	shown += listed
	text := shown + hint
	// The question's own options when it offers some, else the quick
	// replies; a button's text is at most maxSlackButton, its value
	// only its index.
	labels, _ := buttonsOf(n.Request)
	var buttons []slack.BlockElement
	if multi {
		buttons = slackTickElements(labels, tag)
	}
	for i, label := range labels {
		if multi {
			break
		}
		buttons = append(buttons, slack.NewButtonBlockElement("answer-"+strconv.Itoa(i), "a:"+strconv.Itoa(i)+":"+tag, slackText(Clip(label, maxSlackButton))))
	}
	q := asked{Room: room, Kind: n.Request.Kind, ID: n.Request.ID, Cap: n.Cap, Labels: labels, Multi: multi}
	until := expiresOf(n.Event)
	// Noted before it is posted: a message whose timestamp never comes
	// back is still told by the tag its buttons carry.
	if err := putJSON(ctx, s.notesOf(), s.tagKey(tag), tagNote{asked: q, Shown: shown, Until: until}, until); err != nil {
		s.warn("slack: a question not noted before it is posted; a copy whose timestamp never comes back answers nothing", "err", err)
	}
	blocks := []slack.Block{slack.NewSectionBlock(slackMarkup(text), nil, nil), slack.NewActionBlock("answers", buttons...)}
	if n.Test {
		// -check-channels' message asks nothing: no buttons, no line
		// asking for an answer.
		blocks = []slack.Block{slack.NewSectionBlock(slackMarkup(shown), nil, nil)}
	}
	// A phone's notification of a message with blocks shows its text
	// alone: the question's first words are there too.
	channel, ts, err := api.PostMessageContext(ctx, s.Channel, slack.MsgOptionText(headline(n), true), slack.MsgOptionBlocks(blocks...))
	if re := s.refusal(err, slackBotToken); re != nil {
		return re
	}
	if err != nil {
		return fmt.Errorf("slack: post the question to %s: %w%s", s.Channel, s.redact(err), channelHint(err))
	}
	track(ctx, s, chatMsg[slackKey]{key: slackKey{channel, ts}, text: shown}, q, until)
	return nil
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

// sentNote is msgs as their note: the first, and its copies.
func (*Slack) sentNote(msgs []chatMsg[slackKey]) any {
	sn := slackSentNote{Channel: msgs[0].key.channel, TS: msgs[0].key.ts, Text: msgs[0].text}
	for _, m := range msgs[1:] {
		sn.More = append(sn.More, [2]string{m.key.channel, m.key.ts})
	}
	return sn
}

// readSent is the message of question id of room, and its copies, as
// noted.
func (s *Slack) readSent(ctx context.Context, room, id string) ([]chatMsg[slackKey], error) {
	var sn slackSentNote
	ok, err := getJSON(ctx, s.notesOf(), s.sentKey(room, id), &sn)
	if err != nil || !ok {
		return nil, err
	}
	msgs := []chatMsg[slackKey]{{key: slackKey{sn.Channel, sn.TS}, text: sn.Text}}
	for _, k := range sn.More {
		msgs = append(msgs, chatMsg[slackKey]{key: slackKey{k[0], k[1]}, text: sn.Text})
	}
	return msgs, nil
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
