package channel

import (
	"context"
	"slices"

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

// byTag is what the copy k of the question tagged tag asks, when no note
// names the message itself. A copy of a question still pending is noted
// from then on, for its update once it is settled.
func (s *Slack) byTag(ctx context.Context, k slackKey, tag string) (asked, bool, error) {
	if tag == "" {
		return asked{}, false, nil
	}
	var tn tagNote
	ok, err := getJSON(ctx, s.notesOf(), s.tagKey(tag), &tn)
	if err != nil || !ok {
		return asked{}, false, err
	}
	if tn.Gone == "" {
		key := tn.Room + "\x00" + tn.ID
		// With the copy noted, here or by the instance that posted it.
		s.recall(ctx, key, tn.Room, tn.ID)
		s.mu.Lock()
		was, ok := s.sent[key]
		s.mu.Unlock()
		if !ok || was.slackKey != k && !slices.Contains(was.more, k) {
			logOf(s.Logger).Info("slack: a copy of a question whose timestamp was never noted is answered; it is noted now", "id", tn.ID)
		}
		s.track(ctx, key, slackMessage{slackKey: k, text: tn.Shown}, tn.asked, tn.Until)
	}
	return tn.asked, true, nil
}

// recall takes back the message of question id of room noted before a
// restart, so that a question sent again is not posted again.
func (s *Slack) recall(ctx context.Context, key, room, id string) {
	s.mu.Lock()
	_, known := s.sent[key]
	s.mu.Unlock()
	if known {
		return
	}
	m, ok, err := s.sentNoted(ctx, room, id)
	if err != nil || !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent == nil {
		s.sent = map[string]slackMessage{}
	}
	if _, ok := s.sent[key]; !ok {
		s.sent[key] = m
	}
}

// settleTag marks the note of the tag of n's question settled: a press
// on a copy not known then is told it is no longer pending.
func (s *Slack) settleTag(ctx context.Context, room string, n Notice) {
	key := s.tagKey(tagOf(room, n.Request.ID))
	var tn tagNote
	if ok, err := getJSON(ctx, s.notesOf(), key, &tn); err != nil || !ok || tn.Gone != "" {
		return
	}
	tn.Gone = title(n)
	if err := putJSON(ctx, s.notesOf(), key, tn, n.At.Add(goneFor)); err != nil {
		s.warn("slack: a settled question's note not changed", "err", err)
	}
}

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
