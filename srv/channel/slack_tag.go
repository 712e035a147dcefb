package channel

import (
	"context"

	"github.com/slack-go/slack"
)

// As on Telegram (telegram_tag.go), a server killed after Slack posted a
// question's message and before its timestamp came back posts it again
// after the restart. Every copy's buttons carry the question's tag
// ("a:0:<tag>"), and the question is noted by its tag before each post:
// a press on a copy the server does not know finds its question by the
// tag its value carries; a reply in the thread of one of the bot's
// messages it does not know reads that message (conversations.history,
// with the history scope the thread's events need already) for the tag
// of its buttons. The copy is noted then, and updated with the other
// once the question is settled; the copy posted again says that an
// earlier one may be above.

// slackAgainLine tells the person that an earlier copy may be above.
const slackAgainLine = "\n\n(Posted again: an earlier copy of this question may be above, as the server restarted while posting it; either answers.)"

// tagKey names the note of the copies of the question tagged tag.
func (s *Slack) tagKey(tag string) string { return s.lead() + ".tag." + tag }

// copyKey is tagKey: the copies are in one conversation.
func (s *Slack) copyKey(_ slackKey, tag string) string { return s.tagKey(tag) }

// copyKeys is tagKey's one note.
func (s *Slack) copyKeys(tag string) []string { return []string{s.tagKey(tag)} }

// parentTag is the tag of the buttons of the message ts of channel, as
// Slack has it: "" when it has none, cannot be read or is not the bot's.
func (s *Slack) parentTag(ctx context.Context, channel, ts string) string {
	ctx, cancel := context.WithTimeout(ctx, noteTimeout)
	defer cancel()
	r, err := s.client().GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: channel, Latest: ts, Inclusive: true, Limit: 1})
	if err != nil {
		logOf(s.Logger).Debug("slack: a thread's message cannot be read", "err", s.redact(err))
		return ""
	}
	bot, _ := s.botUser.Load().(string)
	for _, m := range r.Messages {
		// Only the bot's own message is a copy: a person (or another
		// app) can post buttons carrying a question's tag too.
		if m.Timestamp != ts || m.BotID == "" || bot != "" && m.User != bot {
			continue
		}
		for _, b := range m.Blocks.BlockSet {
			a, ok := b.(*slack.ActionBlock)
			if !ok || a.Elements == nil {
				continue
			}
			for _, e := range a.Elements.ElementSet {
				if btn, ok := e.(*slack.ButtonBlockElement); ok {
					if tag := tagOfData(btn.Value); tag != "" {
						return tag
					}
				}
			}
		}
	}
	return ""
}
