package channel

import (
	"io"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message/mail"
)

// TelegramNoteKey is the note of what the message msg of chat asks,
// for the tests of package channel_test.
func TelegramNoteKey(t *Telegram, chat int64, msg int) string { return t.noteKey(sentKey{chat, msg}) }

// SlackNoteKey is the note of what the message ts of channel asks.
func SlackNoteKey(s *Slack, channel, ts string) string { return s.noteKey(slackKey{channel, ts}) }

// MailServers are a test's SMTP server, which keeps the mails it is
// given, and IMAP server, whose INBOX takes the replies, for the tests
// of package channel_test.
type MailServers struct {
	sink *smtpSink
	box  *imapBox
}

// NewMailServers starts both, stopped when t ends.
func NewMailServers(t *testing.T) *MailServers {
	return &MailServers{newSMTPSink(t), newIMAPBox(t)}
}

// Email is a channel mailing ana@example.org through them and watching
// their INBOX, logging to log.
func (m *MailServers) Email(log io.Writer) *Email { return newEmail(m.sink, m.box, log) }

// Mail waits for the n-th mail sent, and parses it.
func (m *MailServers) Mail(t *testing.T, n int) (mail.Header, string) {
	t.Helper()
	_, h, body := m.sink.wait(t, n)
	return h, body
}

// Mails is how many mails were sent.
func (m *MailServers) Mails() int {
	m.sink.mu.Lock()
	defer m.sink.mu.Unlock()
	return len(m.sink.mails)
}

// Reply puts in the INBOX a reply from ana@example.org to the mail
// inReplyTo, with the Message-ID mid.
func (m *MailServers) Reply(t *testing.T, mid, inReplyTo, body string) {
	t.Helper()
	m.box.deliverFrom(t, mid, inReplyTo, body)
}

// Seen reports which of the INBOX's mails (by UID) are \Seen.
func (m *MailServers) Seen(t *testing.T) map[imap.UID]bool { return m.box.seen(t) }

// Unsee clears the \Seen flag of the INBOX's mail uid, as though the
// reply had never been marked read (its reader died first).
func (m *MailServers) Unsee(t *testing.T, uid imap.UID) {
	t.Helper()
	c, err := imapclient.DialInsecure(m.box.addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(aaAddr, imapPass).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	if err := c.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: imap.StoreFlagsDel, Silent: true, Flags: []imap.Flag{imap.FlagSeen}}, nil).Close(); err != nil {
		t.Fatal(err)
	}
}

// SetOwedScan sets how often a cluster's lease holder reads the edits
// owed, for the tests of package channel_test.
func SetOwedScan(o *Options, every time.Duration) { o.owedScan = every }

// Owing counts the sends m is trying again (owed.go, asking.go).
func Owing(m *Manager) int {
	m.owed.mu.Lock()
	defer m.owed.mu.Unlock()
	return len(m.owed.items)
}

// ReplyWithPhoto puts in the INBOX a reply from ana@example.org to the
// mail inReplyTo: text, and a JPEG of n bytes attached.
func (m *MailServers) ReplyWithPhoto(t *testing.T, inReplyTo, text string, n int) {
	t.Helper()
	m.box.deliverRaw(t, replyHeader(inReplyTo, "MIME-Version: 1.0", `Content-Type: multipart/mixed; boundary="m"`), multipart("m",
		"Content-Type: text/plain\r\n\r\n"+text+"\r\n", filePart(jpegOf(n, 7), "Content-Type: image/jpeg", "Content-Disposition: attachment; filename=IMG_1.jpg")))
}

// NoteFirstSendOwed notes, as the asker of question id does before it
// claims its send, that m's first channel of token owes its first send
// (oweAsking).
func NoteFirstSendOwed(m *Manager, token, id string) {
	ev, _, _ := m.o.Hub.Waiting(token, id)
	c := m.o.Routes[token][0]
	m.oweAsking(c, m.notice(ev, 0, c))
}

// OwedAt lists when each send m is trying again is next tried.
func OwedAt(m *Manager) []time.Time {
	m.owed.mu.Lock()
	defer m.owed.mu.Unlock()
	var at []time.Time
	for _, it := range m.owed.items {
		at = append(at, it.next)
	}
	return at
}

// AskingGrace is the time an asker has to claim the send it noted owed.
const AskingGrace = askingGrace
