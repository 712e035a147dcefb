package channel

import (
	"context"
	"strconv"
	"strings"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// A question that takes several of its options (multi_select) shows a
// box per option and a Send button. A tap on a box ticks or unticks it:
// the keyboard is edited to show it. Send answers with the options
// ticked, in the order offered. The ticks are kept nowhere but in the
// message's keyboard, which Telegram hands with every tap
// (callback_query.message.reply_markup): an instance restarted, or
// another of the cluster taking the poll, reads them as they are. Two
// taps in the same instant may each read the keyboard before the
// other's edit; the person sees the keyboard as it ends, and Send takes
// what it shows.

const (
	boxTicked   = "☑ "
	boxUnticked = "☐ "
)

// tickKeyboard is the keyboard of a question taking several of labels,
// ticked as ticked says (nil: none), tagged tag: a row per option
// ("t:<index>:<tag>") and Send ("s:<tag>"), at most 22 bytes of data
// each, well within Telegram's 64.
func tickKeyboard(labels []string, ticked []bool, tag string) [][]models.InlineKeyboardButton {
	rows := make([][]models.InlineKeyboardButton, 0, len(labels)+1)
	for i, l := range labels {
		box := boxUnticked
		if i < len(ticked) && ticked[i] {
			box = boxTicked
		}
		rows = append(rows, []models.InlineKeyboardButton{{Text: box + l, CallbackData: "t:" + strconv.Itoa(i) + ":" + tag}})
	}
	return append(rows, []models.InlineKeyboardButton{{Text: "Send", CallbackData: "s:" + tag}})
}

// tapOf reads a button's data: what it does ('a' answers with option i,
// 't' ticks option i, 's' sends the ticked) and the option's index.
func tapOf(data string) (what byte, i int, ok bool) {
	if strings.HasPrefix(data, "s:") {
		return 's', 0, true
	}
	if !strings.HasPrefix(data, "a:") && !strings.HasPrefix(data, "t:") {
		return 0, 0, false
	}
	index, _, _ := strings.Cut(data[2:], ":")
	i, err := strconv.Atoi(index)
	if err != nil || i < 0 {
		return 0, 0, false
	}
	return data[0], i, true
}

// ticks are the boxes of kb ticked, by option index, of labels.
func ticks(kb *models.InlineKeyboardMarkup, labels []string) []bool {
	out := make([]bool, len(labels))
	if kb == nil {
		return out
	}
	for _, row := range kb.InlineKeyboard {
		for _, b := range row {
			if what, i, ok := tapOf(b.CallbackData); ok && what == 't' && i < len(out) {
				out[i] = strings.HasPrefix(b.Text, boxTicked)
			}
		}
	}
	return out
}

// tick ticks or unticks option i of the message at, whose keyboard is
// kb, and tells the person which through reply.
func (t *Telegram) tick(ctx context.Context, b *bot.Bot, at sentKey, kb *models.InlineKeyboardMarkup, labels []string, i int, tag string, reply func(string)) {
	if kb == nil {
		// Older than 48 hours: Telegram hands no keyboard to read.
		reply("This message is too old to tick; reply to it with your answers, or answer in the app.")
		return
	}
	on := ticks(kb, labels)
	on[i] = !on[i]
	_, err := b.EditMessageReplyMarkup(ctx, &bot.EditMessageReplyMarkupParams{ChatID: at.chat, MessageID: at.msg,
		ReplyMarkup: keyboard(tickKeyboard(labels, on, tag))})
	switch {
	case err == nil || notModified(err):
	case uneditable(err):
		reply("This message can no longer be ticked; reply to it with your answers, or answer in the app.")
		return
	default:
		logOf(t.Logger).Warn("telegram: a tick not shown", "err", t.redact(err))
		reply("Could not tick that just now; tap again.")
		return
	}
	if on[i] {
		reply("Ticked: " + labels[i])
	} else {
		reply("Unticked: " + labels[i])
	}
}
