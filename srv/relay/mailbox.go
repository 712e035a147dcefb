package relay

// post keeps a user.message, what a participant typed, until an in-process
// agent takes it (Local.NextUserMessage); past maxMailbox the oldest goes.
// One that would pass the token's budget (limits.go) is refused, nothing
// dropped for it.
func (ch *channel) post(env Envelope) *Error {
	old := ch.mailbox
	if len(ch.mailbox) >= maxMailbox {
		ch.mailbox = ch.mailbox[1:]
	}
	ch.mailbox = append(ch.mailbox, env)
	if !ch.charge(false) {
		ch.mailbox = old
		return ch.overBudget("this user.message")
	}
	if len(old) >= maxMailbox {
		ch.r.log.Warn("user message mailbox full, dropped the oldest", "relay", ch.name)
	}
	ch.posted()
	close(ch.mailboxWake)
	ch.mailboxWake = make(chan struct{})
	return nil
}
