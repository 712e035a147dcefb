package channel

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// A question's Telegram message is known by its ID, which Telegram
// answers the send with. A server killed after Telegram made the
// message and before that answer came (or a send whose answer was lost
// on the way, and which is tried again) never learns it: the question
// is sent again, and the person holds two copies. So that both answer,
// every copy's buttons carry the question's tag besides their index
// ("a:0:<tag>"), and before each send a note keyed by the chat and the
// tag says what the copies ask. A tap on a copy the server does not
// know, or a reply to it (Telegram hands the replied message's keyboard
// with the reply), finds its question by the tag, and the copy is
// noted then, so that it is edited with the others once the question
// is settled. The copy sent again says that an earlier one may be
// above. The tag is the notice's Seq, keyed with the server's secret.
// It is no capability: it only names the question, whose answer is
// still taken from the configured chats alone.

// tagKey names the note of the copies of the question tagged tag in
// chat.
func (t *Telegram) tagKey(chat int64, tag string) string {
	return "telegram." + strconv.FormatInt(t.botID(), 10) + ".tag." + strconv.FormatInt(chat, 10) + "." + tag
}

// copyKey is tagKey, of the chat of the message k.
func (t *Telegram) copyKey(k sentKey, tag string) string { return t.tagKey(k.chat, tag) }

// copyKeys are the notes of the copies of the question tagged tag, in
// each chat.
func (t *Telegram) copyKeys(tag string) []string {
	keys := make([]string, len(t.Chats))
	for i, chat := range t.Chats {
		keys[i] = t.tagKey(chat, tag)
	}
	return keys
}

// tagNote is what the copies of a question in a chat ask, noted before
// each is sent: the question, the text shown (for the edit once it is
// settled) and until when it waits.
type tagNote struct {
	asked
	Shown string    `json:"s,omitempty"`
	Until time.Time `json:"u"`
}

// tagOfData is the tag a button's data carries ("a:<index>:<tag>", a
// box to tick "t:<index>:<tag>", Send "s:<tag>"; telegram_multi.go), ""
// for a button of an older message ("a:<index>").
func tagOfData(data string) string {
	if rest, ok := strings.CutPrefix(data, "s:"); ok {
		return rest
	}
	rest, ok := strings.CutPrefix(data, "a:")
	if !ok {
		rest, ok = strings.CutPrefix(data, "t:")
	}
	if !ok {
		return ""
	}
	_, tag, _ := strings.Cut(rest, ":")
	return tag
}

// tagOfMarkup is the tag of a message's keyboard, "" when it has none
// (settled: its buttons are gone).
func tagOfMarkup(kb *models.InlineKeyboardMarkup) string {
	if kb == nil {
		return ""
	}
	for _, row := range kb.InlineKeyboard {
		for _, b := range row {
			if tag := tagOfData(b.CallbackData); tag != "" {
				return tag
			}
		}
	}
	return ""
}

// settle edits the messages of n's question, settled, to say so and
// drop their buttons. Its notes are forgotten only once every edit went
// through: an edit that fails (Telegram out of reach) is tried again,
// also after a restart (owed.go), and finds them.
func (t *Telegram) settle(ctx context.Context, b *bot.Bot, n Notice, room string) error {
	msgs, err := settledMsgs(ctx, t, n, room)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.photo {
			continue
		}
		_, err := b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: m.key.chat, MessageID: m.key.msg, ParseMode: models.ParseModeHTML,
			Text: m.text + settledLine(title(n)), ReplyMarkup: keyboard{}})
		switch {
		case err == nil || notModified(err):
		case uneditable(err):
			// Deleted by the person (a copy sent again, most likely):
			// nothing to edit, now or later; the others are edited.
			logOf(t.Logger).Info("telegram: a settled question's message is gone, not edited", "id", n.Request.ID, "err", t.redact(err))
		case t.refusal(err) != nil:
			return t.refusal(err)
		default:
			return fmt.Errorf("telegram: edit the question's message: %w", t.redact(err))
		}
	}
	forgetSent(ctx, t, room, n.Request.ID)
	return nil
}

// uneditable: Telegram has no such message to edit (the person deleted
// it), or will not edit it; tried again, the edit fails the same way.
func uneditable(err error) bool {
	s := err.Error()
	return strings.Contains(s, "message to edit not found") || strings.Contains(s, "message can't be edited") ||
		strings.Contains(s, "MESSAGE_ID_INVALID")
}

// notModified: Telegram refused an edit that changes nothing: the
// message says so already (an edit tried again after one that went
// through, its answer lost).
func notModified(err error) bool {
	return strings.Contains(err.Error(), "message is not modified")
}
