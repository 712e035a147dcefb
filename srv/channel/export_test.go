package channel

// TelegramNoteKey is the note of what the message msg of chat asks,
// for the tests of package channel_test.
func TelegramNoteKey(t *Telegram, chat int64, msg int) string { return t.noteKey(sentKey{chat, msg}) }

// SlackNoteKey is the note of what the message ts of channel asks.
func SlackNoteKey(s *Slack, channel, ts string) string { return s.noteKey(slackKey{channel, ts}) }
