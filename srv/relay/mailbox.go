package relay

// post keeps a user.message, what a participant typed, until an in-process
// agent takes it (Local.NextUserMessage); past maxMailbox the oldest goes.
func (ch *channel) post(env Envelope) {
	if len(ch.mailbox) >= maxMailbox {
		ch.r.log.Warn("user message mailbox full, dropping the oldest", "relay", ch.name)
		ch.mailbox = ch.mailbox[1:]
	}
	ch.mailbox = append(ch.mailbox, env)
	ch.posted()
	close(ch.mailboxWake)
	ch.mailboxWake = make(chan struct{})
}
