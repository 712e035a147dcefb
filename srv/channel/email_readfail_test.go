package channel

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
)

// failingBody is a session whose fetches of a whole mail fail while
// fails is above zero, as a server going away mid-read does; the
// fetches of headers go through.
type failingBody struct {
	imapserver.Session
	fails *atomic.Int32
	// only, when set, is the one mail (by its UID set) that fails.
	only string
}

func (s failingBody) Fetch(w *imapserver.FetchWriter, numSet imap.NumSet, o *imap.FetchOptions) error {
	for _, sec := range o.BodySection {
		if sec.Specifier == imap.PartSpecifierNone && len(sec.Part) == 0 && (s.only == "" || numSet.String() == s.only) &&
			s.fails.Add(-1) >= 0 {
			return errors.New("the server is going away")
		}
	}
	return s.Session.Fetch(w, numSet, o)
}

// newFailingBox is an IMAP box whose sessions are failingBody.
func newFailingBox(t *testing.T, fails *atomic.Int32, only string) *imapBox {
	box := &imapBox{mem: imapmemserver.New(), user: imapmemserver.NewUser(aaAddr, imapPass)}
	if err := box.user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	box.mem.AddUser(box.user)
	box.wrap = func(s imapserver.Session) imapserver.Session { return failingBody{s, fails, only} }
	box.serve(t, "127.0.0.1:0")
	return box
}

// TestEmailReplyReadFailingIsReadAgain: a reply whose text cannot be
// fetched (the connection dropped between its header and its body) is
// looked at again once the watch is back, not passed over as if it had
// been read: it answers.
func TestEmailReplyReadFailingIsReadAgain(t *testing.T) {
	sink := newSMTPSink(t)
	var fails atomic.Int32
	box := newFailingBox(t, &fails, "")
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	e := newEmail(sink, box, logs)
	f := newFixture(t, map[string][]Channel{tokA: {e}}, Options{})
	answered := f.ask(tokA, "q-1")
	_, h, _ := sink.wait(t, 1)
	id, _ := h.MessageID()
	logs.waitFor(t, "email: watching the mailbox")

	fails.Store(1)
	box.deliver(t, "ana@example.org", id, "Ship it.\r\n")
	if rep := waitAnswer(t, answered, logs); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
	if fails.Load() > 0 {
		t.Fatal("the reply's fetch never failed: the test tests nothing")
	}
}

// TestEmailUnreadableReplyBlocksNoOther: a mail whose text the server
// never hands over (a damaged one) is tried a few times, then passed
// over with a word in the log: the replies after it still answer.
func TestEmailUnreadableReplyBlocksNoOther(t *testing.T) {
	sink := newSMTPSink(t)
	var fails atomic.Int32
	fails.Store(1 << 20)
	box := newFailingBox(t, &fails, "1")
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	e := newEmail(sink, box, logs)
	f := newFixture(t, map[string][]Channel{tokA: {e}}, Options{})
	f.ask(tokA, "q-1")
	_, h1, _ := sink.wait(t, 1)
	id1, _ := h1.MessageID()
	answered := f.ask(tokA, "q-2")
	_, h2, _ := sink.wait(t, 2)
	id2, _ := h2.MessageID()
	logs.waitFor(t, "email: watching the mailbox")

	box.deliver(t, "ana@example.org", id1, "Ship it.\r\n")
	box.deliver(t, "ana@example.org", id2, "Wait.\r\n")
	if rep := waitAnswer(t, answered, logs); rep == nil || rep.Contents[0].GetText().GetText() != "Wait." {
		t.Fatalf("the agent got %+v", rep)
	}
	logs.waitFor(t, "email: a reply that cannot be read is passed over")
}
