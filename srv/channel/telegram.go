package channel

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Telegram sends questions to Telegram chats through a bot, with
// github.com/go-telegram/bot over long polling (no public address
// needed): a question as a message with its answers as an inline
// keyboard (its buttons carry only their index: the capability they
// answer with stays here); a tap on one, or a reply to the message
// (text), answers it.
// When the question is settled anywhere the message is edited to say so
// and its keyboard removed. Answers count only from the chats it is
// configured for.
type Telegram struct {
	// BotToken is the bot's token (from @BotFather); never logged.
	BotToken string
	// Chats are the chat IDs it sends to and takes answers from (a
	// person's own chat with the bot: their user ID).
	Chats []int64
	// ServerURL is the Bot API's address (default Telegram's).
	ServerURL string
	Logger    *slog.Logger

	// transport carries the calls to the Bot API (nil: the default):
	// a test's in-memory network.
	transport http.RoundTripper

	once sync.Once
	bot  *bot.Bot
	err  error

	// handlers: Listen registers its handlers once, however often it
	// runs (each time this instance leads the bot's poll).
	handlers sync.Once

	sent sentQuestions[[]chatMsg[sentKey]] // its messages, for the edit
	// answering: its notes, a message → the question it asks (asked), for
	// whichever instance polls the chat's taps and replies; and the
	// credentials refused now, told what the poll finds.
	answering
}

type sentKey struct {
	chat int64
	msg  int
}

// maxTracked bounds the messages remembered for replies and edits.
const maxTracked = 10_000

// Name is "telegram".
func (*Telegram) Name() string { return "telegram" }

// lead: the bot's updates are polled by one instance at a time
// (Telegram answers a second poller with 409 Conflict).
func (t *Telegram) lead() string { return leadName("telegram", t.BotToken) }

func (t *Telegram) logger() *slog.Logger                       { return logOf(t.Logger) }
func (t *Telegram) sentOf() *sentQuestions[[]chatMsg[sentKey]] { return &t.sent }

// noteKey names the note of the message k: the bot's, as chats of two
// bots may number their messages alike.
func (t *Telegram) noteKey(k sentKey) string {
	return "telegram." + strconv.FormatInt(t.botID(), 10) + "." + strconv.FormatInt(k.chat, 10) + "." + strconv.Itoa(k.msg)
}

// redact keeps the bot token out of an error (the library's URLs hold
// it, escaped).
func (t *Telegram) redact(err error) error {
	return redact(err, t.BotToken, url.PathEscape(t.BotToken))
}

// telegramBotToken is the setting of the bot's token: its name, not
// a token.
const telegramBotToken = "[channels.telegram] bot_token" // #nosec G101 -- a setting's name

// refusal is err as the bot token's refusal: Telegram answers 401 to a
// token it does not know (revoked, or mistyped) and 404 to one of no
// token's shape; nil for any other err.
func (t *Telegram) refusal(err error) *RefusedError {
	var code int
	switch {
	case errors.Is(err, bot.ErrorUnauthorized):
		code = http.StatusUnauthorized
	case errors.Is(err, bot.ErrorNotFound):
		code = http.StatusNotFound
	default:
		return nil
	}
	words := t.redact(err).Error()
	if _, d, ok := strings.Cut(words, ", "); ok { // "unauthorized, Unauthorized"
		words = d
	}
	return telegramRefused(code, words)
}

// chatHint is how to fix [channels.telegram] chats when err is
// Telegram's word that a chat is not the bot's to write to: one it
// does not know (400 "chat not found": mistyped, or a person who never
// wrote to the bot) or that shut it out (403: blocked, or left).
func chatHint(err error) string {
	notFound := errors.Is(err, bot.ErrorBadRequest) && strings.Contains(err.Error(), "chat not found")
	if !notFound && !errors.Is(err, bot.ErrorForbidden) {
		return ""
	}
	return " (check [channels.telegram] chats: a bot writes only to a chat that wrote to it first; send the bot a message, then read https://api.telegram.org/bot<token>/getUpdates for its message.chat.id)"
}

// telegramRefused is the bot token's refusal, Telegram having answered
// code with words.
func telegramRefused(code int, words string) *RefusedError {
	re := &RefusedError{Channel: "telegram", Setting: telegramBotToken, Said: serviceSaid("Telegram", strconv.Itoa(code), words)}
	if code == http.StatusNotFound {
		re.Hint = "a token is the whole of what @BotFather gave, 123456:ABC…; with api_url set, check it too"
	} else {
		re.Hint = "@BotFather's /token shows the bot's token; /revoke makes a new one"
	}
	return re
}

// client makes the bot client once (without a getMe round trip: Send and
// Listen say what fails).
func (t *Telegram) client() (*bot.Bot, error) {
	t.once.Do(func() {
		opts := []bot.Option{bot.WithSkipGetMe(), bot.WithNotAsyncHandlers(),
			bot.WithErrorsHandler(func(err error) {
				logOf(t.Logger).Warn("telegram", "err", t.redact(err))
			}),
			bot.WithDefaultHandler(func(context.Context, *bot.Bot, *models.Update) {}),
		}
		if t.ServerURL != "" {
			opts = append(opts, bot.WithServerURL(strings.TrimRight(t.ServerURL, "/")))
		}
		if t.transport != nil {
			opts = append(opts, bot.WithHTTPClient(pollWait+pollSlack, &http.Client{Timeout: pollWait + pollSlack, Transport: t.transport}))
		}
		t.bot, t.err = bot.New(t.BotToken, opts...)
		t.err = t.redact(t.err)
	})
	return t.bot, t.err
}

// Send delivers n to every chat: a question with its keyboard, or the
// edit of a question's messages once it is settled.
func (t *Telegram) Send(ctx context.Context, n Notice) error {
	b, err := t.client()
	if err != nil {
		return err
	}
	room := store.Room(n.Token)
	if n.Kind != hub.Asked {
		return t.settle(ctx, b, n, room)
	}
	key := questionKey(room, n.Request.ID)
	tag := n.Seq
	recall(ctx, t, room, n.Request.ID)
	// A chat that may hold a copy sent before (a send whose answer never
	// came: the server died, or the call failed after Telegram made the
	// message) is told so in this one; that copy answers too (byTag).
	again := map[int64]bool{}
	for _, chat := range t.Chats {
		if t.already(key, chat) {
			continue
		}
		var tn tagNote
		if ok, err := getJSON(ctx, t.notesOf(), t.tagKey(chat, tag), &tn); err == nil && ok {
			again[chat] = true
		}
	}
	// shown stays once the question is settled, the settled line added;
	// the hint goes with the keyboard. The question has what the rest
	// leaves of the message.
	head := "<b>" + html.EscapeString(title(n)) + "</b>\n\n"
	var listed string
	if opts, some := described(n.Request); some || cutOnButton(opts, maxShownButton) {
		listed = "\n"
		for _, o := range opts {
			listed += "\n• <b>" + html.EscapeString(o.label) + "</b>"
			if o.desc != "" {
				listed += " — " + html.EscapeString(o.desc)
			}
		}
	}
	hint := plainHint
	labels, own := buttonsOf(n.Request)
	multi := multiOf(n.Request)
	if multi {
		hint = plainTickHint
	}
	cutMark := "\n…\n\n<i>" + restInApp + "</i>"
	if link := appLink(n); link != "" {
		cutMark = "\n…\n\n<i><a href=\"" + html.EscapeString(link) + "\">" + restInApp + "</a></i>"
	}
	hints := italic(hint)
	if len(again) > 0 {
		hints = italic(plainAgain) + hints
	}
	// Once settled, the hint gives way to a line saying so, a title long.
	fits := maxTelegramMessage - tgLen(head+listed+cutMark) - max(tgLen(hints), tgLen(settledLine(""))+maxTitle)
	body, photos, cut := telegramQuestion(n.Request.Text, fits)
	if cut {
		body += cutMark
	}
	shown := head + body + listed
	// The quick replies fit on one row; a question's own options, longer
	// and up to ten, take a row each.
	var rows [][]models.InlineKeyboardButton
	if multi {
		rows = tickKeyboard(labels, nil, tag)
	}
	for i, label := range labels {
		if multi {
			break
		}
		b := models.InlineKeyboardButton{Text: label, CallbackData: "a:" + strconv.Itoa(i) + ":" + tag}
		if len(rows) == 0 || own {
			rows = append(rows, nil)
		}
		rows[len(rows)-1] = append(rows[len(rows)-1], b)
	}
	invite := italic(hint)
	if n.Test {
		// -check-channels' message asks nothing: nothing to tap, no
		// line asking for an answer.
		rows, hint, invite, hints = nil, "", "", ""
	}
	for _, chat := range t.Chats {
		if t.already(key, chat) { // a retry after a later chat failed
			continue
		}
		text := shown + invite
		if again[chat] {
			text = shown + hints
		}
		q := asked{Room: room, Kind: n.Request.Kind, ID: n.Request.ID, Cap: n.Cap, Labels: labels, Multi: multi}
		until := expiresOf(n.Event)
		// Noted before it is sent: a message whose ID never comes back
		// (the server dies as Telegram makes it) is still told by the
		// tag its buttons carry.
		if err := putJSON(ctx, t.notesOf(), t.tagKey(chat, tag), tagNote{asked: q, Shown: shown, Until: until}, until); err != nil {
			logOf(t.Logger).Warn("telegram: a question not noted before it is sent; a copy whose ID never comes back answers nothing", "err", err)
		}
		m, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: chat, Text: text, ParseMode: models.ParseModeHTML,
			ReplyMarkup: keyboard(rows)})
		sent := shown
		if formattingRefused(err) {
			// Refused for its formatting, it would be at every try: the
			// question goes as text with no tag (tgplain.go).
			logOf(t.Logger).Warn("telegram: a question's formatting refused; sent as plain text", "err", t.redact(err))
			hint := hint
			if again[chat] {
				hint = plainAgain + hint
			}
			sent = telegramPlain(n, maxTelegramMessage-max(tgLen(plainAgain+plainTickHint), tgLen(settledLine(""))+maxTitle))
			m, err = b.SendMessage(ctx, &bot.SendMessageParams{ChatID: chat, Text: sent + hint, ParseMode: models.ParseModeHTML,
				ReplyMarkup: keyboard(rows)})
		}
		if re := t.refusal(err); re != nil {
			return re
		}
		if err != nil {
			return fmt.Errorf("telegram: send the question to chat %d: %w%s", chat, t.redact(err), chatHint(err))
		}
		track(ctx, t, chatMsg[sentKey]{key: sentKey{chat, m.ID}, text: sent}, q, until)
		// Its images follow as photos replying to it; one that fails is
		// told in the log, the question stands without it.
		for i, p := range photos {
			name := "image-" + strconv.Itoa(i+1) + "." + strings.TrimPrefix(p.mime, "image/")
			pm, err := b.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: chat, Caption: Clip(p.alt, 1000),
				Photo:           &models.InputFileUpload{Filename: name, Data: bytes.NewReader(p.data)},
				ReplyParameters: &models.ReplyParameters{MessageID: m.ID}})
			if err != nil {
				logOf(t.Logger).Warn("telegram: a question's image not sent", "err", t.redact(err))
				continue
			}
			track(ctx, t, chatMsg[sentKey]{key: sentKey{chat, pm.ID}, photo: true}, q, until)
		}
	}
	return nil
}

func (t *Telegram) already(key string, chat int64) bool {
	msgs, _ := t.sent.get(key)
	return slices.ContainsFunc(msgs, func(m chatMsg[sentKey]) bool { return m.key.chat == chat && !m.photo })
}

// sentNote is a question's messages, for the instance that hears it is
// settled to edit them: its text once (the same in every chat).
type sentNote struct {
	Text string        `json:"t"`
	Msgs []sentNoteMsg `json:"m"`
}

type sentNoteMsg struct {
	Chat  int64 `json:"c"`
	Msg   int   `json:"m"`
	Photo bool  `json:"p,omitempty"`
}

// sentKey names the note of the messages of question id of room.
func (t *Telegram) sentKey(room, id string) string {
	return "telegram." + strconv.FormatInt(t.botID(), 10) + ".q." + room + "." + id
}

// sentNote is msgs as their note: their text once (the last
// message's with text; the same in every chat but one refused its
// formatting).
func (*Telegram) sentNote(msgs []chatMsg[sentKey]) any {
	var sn sentNote
	for _, m := range msgs {
		sn.Msgs = append(sn.Msgs, sentNoteMsg{m.key.chat, m.key.msg, m.photo})
		if !m.photo {
			sn.Text = m.text
		}
	}
	return sn
}

// readSent are the messages of question id of room, as noted.
func (t *Telegram) readSent(ctx context.Context, room, id string) ([]chatMsg[sentKey], error) {
	var sn sentNote
	ok, err := getJSON(ctx, t.notesOf(), t.sentKey(room, id), &sn)
	if err != nil || !ok {
		return nil, err
	}
	msgs := make([]chatMsg[sentKey], len(sn.Msgs))
	for i, m := range sn.Msgs {
		msgs[i] = chatMsg[sentKey]{key: sentKey{m.Chat, m.Msg}, photo: m.Photo}
		if !m.Photo {
			msgs[i].text = sn.Text
		}
	}
	return msgs, nil
}

// Listen takes the chats' taps and replies until ctx ends (telegram_poll.go).
func (t *Telegram) Listen(ctx context.Context, a Answers) {
	b, err := t.client()
	if err != nil {
		logOf(t.Logger).Error("telegram: cannot listen", "err", err)
		return
	}
	t.handlers.Do(func() {
		b.RegisterHandlerMatchFunc(func(u *models.Update) bool { return u.CallbackQuery != nil }, func(ctx context.Context, b *bot.Bot, u *models.Update) {
			t.tapped(ctx, b, u.CallbackQuery, a)
		})
		b.RegisterHandlerMatchFunc(func(u *models.Update) bool { return u.Message != nil && u.Message.ReplyToMessage != nil },
			func(ctx context.Context, b *bot.Bot, u *models.Update) { t.replied(ctx, b, u.Message, a) })
	})
	t.poll(ctx, b)
}

// allowed: the chat is one the config names.
func (t *Telegram) allowed(chat int64) bool { return slices.Contains(t.Chats, chat) }

// maxNotice bounds the notice a tap is answered with: Telegram takes
// 0-200 characters (core.telegram.org/bots/api#answercallbackquery).
const maxNotice = 200

// tapped answers with a keyboard button's capability.
func (t *Telegram) tapped(ctx context.Context, b *bot.Bot, q *models.CallbackQuery, a Answers) {
	reply := func(text string) {
		// A notice holds 200 characters (Clip counts bytes, never fewer): the
		// labels Send answers with may be longer together.
		_, _ = b.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: q.ID, Text: Clip(text, maxNotice)})
	}
	// The message tapped: Telegram hands one older than 48 hours as
	// "inaccessible", its chat and ID all there is.
	var at sentKey
	switch m := q.Message; {
	case m.Message != nil:
		at = sentKey{m.Message.Chat.ID, m.Message.ID}
	case m.InaccessibleMessage != nil:
		at = sentKey{m.InaccessibleMessage.Chat.ID, m.InaccessibleMessage.MessageID}
	}
	if at.msg == 0 || !t.allowed(at.chat) {
		reply("This chat may not answer.")
		return
	}
	// The buttons it had and the capability they answer with; one no
	// longer tracked (settled, or forgotten) answers nothing.
	question, known, err := getAsked(ctx, t.notesOf(), t.noteKey(at))
	if err == nil && !known {
		// A copy whose send never told its ID (telegram_tag.go).
		question, known, err = byTag(ctx, t, at, tagOfData(q.Data))
	}
	if err != nil {
		logOf(t.Logger).Warn("telegram: a tap's question cannot be read", "err", err)
		if later(ctx) {
			return // tried again, its update not confirmed
		}
		reply("Your answer could not be taken just now; tap again.")
		return
	}
	what, i, ok := tapOf(q.Data)
	if !ok || known && i >= len(question.Labels) || known && (what == 'a') == question.Multi {
		reply("Not an answer of ours.")
		return
	}
	// What the tap answers with: its option, or (Send) the options
	// ticked on the message's keyboard as Telegram hands it.
	var chosen []string
	var kb *models.InlineKeyboardMarkup
	if q.Message.Message != nil {
		kb = q.Message.Message.ReplyMarkup
	}
	switch {
	case !known:
	case what == 'a':
		chosen = question.Labels[i : i+1]
	case what == 's':
		chosen = ticked(question.Labels, ticks(kb, question.Labels))
	}
	noted := known
	if known && question.Gone != "" {
		if len(chosen) > 0 && a.tookAlready(question, "telegram:"+t.Name(), choiceContents(chosen)) {
			reply("Answered: " + strings.Join(chosen, ", ")) // this very tap, taken before
			return
		}
		known = false
	}
	if !known {
		if !noted && mayCome(t.notesOf()) && laterAside(ctx) {
			return // its note may be on its way: tried again, unconfirmed
		}
		if !noted && notesLost(t.notesOf()) {
			reply(unnotedTap)
			return
		}
		reply(answercap.ErrVoid.Error())
		return
	}
	switch {
	case what == 't':
		t.tick(ctx, b, at, kb, question.Labels, i, tagOfData(q.Data), reply)
		return
	case what == 's' && kb == nil:
		reply("This message is too old to tick; reply to it with your answers, or answer in the app.")
		return
	case len(chosen) == 0:
		reply("Tick one or more answers first, then tap Send.")
		return
	}
	err = a.ByCapAll(ctx, question.Cap, chosen)
	if answercap.Unsaved(err) && later(ctx) {
		return // not saved just now, the capability kept: tried again
	}
	switch {
	case err == nil:
		reply("Answered: " + strings.Join(chosen, ", "))
	case a.tookAlready(question, "telegram:"+t.Name(), choiceContents(chosen)):
		// This very tap, taken before (its update polled again after
		// the lead moved): it was answered, by it.
		reply("Answered: " + strings.Join(chosen, ", "))
	case errors.Is(err, hub.ErrNotPending):
		reply("The question is no longer pending.")
	default:
		reply(err.Error())
	}
}

// botID is the bot's own user ID: the number its token starts with.
func (t *Telegram) botID() int64 {
	id, _, _ := strings.Cut(t.BotToken, ":")
	n, _ := strconv.ParseInt(id, 10, 64)
	return n
}

// replied answers the question a reply is to, with its text, or its
// photo and caption. A reply to the bot that answers nothing says why:
// what a person wrote is never dropped without a word.
func (t *Telegram) replied(ctx context.Context, b *bot.Bot, m *models.Message, a Answers) {
	if !t.allowed(m.Chat.ID) {
		return
	}
	notTaken := func(why string) {
		// Once across the cluster: its update may be handled again by
		// the next instance to poll.
		told := t.noteKey(sentKey{m.Chat.ID, m.ID})
		tell, finish := tellOnce(ctx, t.notesOf(), logOf(t.Logger), told)
		if !tell {
			return
		}
		_, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: m.Chat.ID, Text: "Not taken: " + why,
			ReplyParameters: &models.ReplyParameters{MessageID: m.ID}})
		if err != nil {
			logOf(t.Logger).Warn("telegram: cannot tell why a reply was not taken", "err", t.redact(err))
		}
		finish(err == nil)
	}
	to := sentKey{m.Chat.ID, m.ReplyToMessage.ID}
	q, ok, err := getAsked(ctx, t.notesOf(), t.noteKey(to))
	if from := m.ReplyToMessage.From; err == nil && !ok && from != nil && from.ID == t.botID() {
		// A copy whose send never told its ID (telegram_tag.go).
		q, ok, err = byTag(ctx, t, to, tagOfMarkup(m.ReplyToMessage.ReplyMarkup))
	}
	if err != nil {
		logOf(t.Logger).Warn("telegram: a reply's question cannot be read", "err", err)
		if later(ctx) {
			return // tried again, its update not confirmed
		}
		notTaken("the question it answers could not be looked up just now; reply again, or answer in the app.")
		return
	}
	token, mine := a.token(q.Room)
	whoID := strconv.FormatInt(m.Chat.ID, 10)
	if text := strings.TrimSpace(m.Text); ok && mine && q.Gone != "" && len(m.Photo) == 0 && text != "" &&
		a.tookAlready(q, "telegram:"+whoID, typedContents(q.Labels, q.Multi, false, text)) {
		return // this very reply, taken before (its update polled again)
	}
	if !ok || !mine || q.Gone != "" {
		// Not a question of ours (any more): settled, or asked before a
		// restart. A reply to a message of someone else's is none of
		// the bot's business.
		if from := m.ReplyToMessage.From; from != nil && from.ID == t.botID() {
			if !ok && mayCome(t.notesOf()) && laterAside(ctx) {
				// The instance that sent it may keep its note until
				// NATS takes it: tried again, unconfirmed, while the
				// updates after it go on.
				return
			}
			if !ok && notesLost(t.notesOf()) {
				notTaken(unnoted)
				return
			}
			notTaken("the message you replied to asks no pending question (it was answered, withdrawn or timed out, or is none); reply to a question's own message, or answer in the app.")
		}
		return
	}
	if strings.TrimSpace(m.Text) == "" && strings.TrimSpace(m.Caption) == "" && len(m.Photo) == 0 {
		notTaken("an answer is text or a photo.")
		return
	}
	who := "Telegram"
	if m.From != nil && m.From.FirstName != "" {
		who = Clip(m.From.FirstName, 64) + " · Telegram"
	}
	var contents []*pb.McpResultContent
	if len(m.Photo) > 0 {
		img, err := t.photo(ctx, b, m.Photo)
		if err != nil {
			notTaken("the photo could not be read (" + t.redact(err).Error() + ")")
			return
		}
		contents = append(contents, img)
	}
	if text := strings.TrimSpace(m.Text + m.Caption); text != "" {
		contents = append(typedContents(q.Labels, q.Multi && len(m.Photo) == 0, false, text), contents...)
	}
	err = a.ReplyWith(ctx, token, q.Kind, q.ID, contents, who, whoID, "telegram")
	if answercap.Unsaved(err) && later(ctx) {
		return // not saved just now: tried again, its update not confirmed
	}
	if err != nil && !a.tookAlready(q, "telegram:"+whoID, contents) {
		notTaken(err.Error())
		return
	}
	if file := fileOf(m); file != "" {
		_, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: m.Chat.ID,
			Text:            "Taken without the " + file + ": an answer holds text and photos, so it was left out.",
			ReplyParameters: &models.ReplyParameters{MessageID: m.ID}})
		if err != nil {
			logOf(t.Logger).Warn("telegram: cannot tell a reply's file was left out", "err", t.redact(err))
		}
	}
}

// fileOf names the file of m an answer cannot hold (all but a photo),
// "" when it has none.
func fileOf(m *models.Message) string {
	switch {
	case m.Document != nil:
		return "document"
	case m.Video != nil:
		return "video"
	case m.Animation != nil:
		return "animation"
	case m.Audio != nil:
		return "audio"
	case m.Voice != nil:
		return "voice note"
	}
	return ""
}

// maxPhotoBytes bounds a photo read as an answer: what a model's API
// reads (5 MB of base64), as the web app fits what it attaches; a larger
// one would be refused at the agent's next turn. photoTimeout is the time
// to read it.
const (
	maxPhotoBytes = 3_750_000
	photoTimeout  = 30 * time.Second
)

// photo reads the largest size of a reply's photo that is within
// maxPhotoBytes, as an answer's image.
func (t *Telegram) photo(ctx context.Context, b *bot.Bot, sizes []models.PhotoSize) (*pb.McpResultContent, error) {
	best := -1
	for i, s := range sizes {
		if s.FileSize <= maxPhotoBytes && (best < 0 || s.Width*s.Height > sizes[best].Width*sizes[best].Height) {
			best = i
		}
	}
	if best < 0 {
		return nil, errors.New("it is larger than 3.75 MB")
	}
	// A slow download holds up the updates of its message alone
	// (telegram_poll.go), and those for photoTimeout at most.
	ctx, cancel := context.WithTimeout(ctx, photoTimeout)
	defer cancel()
	f, err := b.GetFile(ctx, &bot.GetFileParams{FileID: sizes[best].FileID})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.FileDownloadLink(f), nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: t.transport}).Do(req) // #nosec G107 -- the Bot API's own file link
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the Bot API answered %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxPhotoBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxPhotoBytes {
		return nil, errors.New("it is larger than 3.75 MB")
	}
	mime := http.DetectContentType(data)
	if !strings.HasPrefix(mime, "image/") {
		return nil, errors.New("it is no image")
	}
	return &pb.McpResultContent{Type: 2, Image: &pb.ImageContent{Type: "image", Data: base64.StdEncoding.EncodeToString(data), MimeType: mime}}, nil
}

// settledLine ends a settled question's message: its title (title).
func settledLine(title string) string { return "\n\n— " + html.EscapeString(title) }

// keyboard is an inline keyboard as the Bot API reads it, each button
// its text and its callback_data alone. The library's button writes an
// empty copy_text beside them, a second kind of button where the API
// takes "exactly one" (core.telegram.org/bots/api#inlinekeyboardbutton).
type keyboard [][]models.InlineKeyboardButton

func (k keyboard) MarshalJSON() ([]byte, error) {
	type button struct {
		Text string `json:"text"`
		Data string `json:"callback_data"`
	}
	rows := make([][]button, len(k))
	for i, row := range k {
		rows[i] = make([]button, len(row))
		for j, b := range row {
			rows[i][j] = button{b.Text, b.CallbackData}
		}
	}
	return json.Marshal(struct {
		InlineKeyboard [][]button `json:"inline_keyboard"`
	}{rows})
}
