package channel_test

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/srv/channel"
)

// emailNode is an instance's e-mail channel over the servers; its log
// goes to logs.
func emailNode(t *testing.T, n *node, ms *channel.MailServers, logs *lockedLog) *channel.Manager {
	e := ms.Email(logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("instance %s's log:\n%s", n.name, logs.String())
		}
	})
	m := channel.New(channel.Options{Hub: n.hub, Caps: n.caps, Routes: map[string][]channel.Channel{tokA: {e}}, Notes: n.ch, Leader: n.ch,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	t.Cleanup(m.Close)
	return m
}

// TestEmailAcrossInstances: a question mailed by instance A is answered
// by a reply that instance B, which watches the mailbox, reads; B, where
// the answer is written (and so told), mails the follow-up in the
// question's thread, and tells a later reply by whom it was answered.
func TestEmailAcrossInstances(t *testing.T) {
	ms := channel.NewMailServers(t)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	logsA, logsB := &lockedLog{}, &lockedLog{}
	emailNode(t, b, ms, logsB)
	waitUntil(t, "B watches the mailbox", func() bool { return logsB.has("email: watching the mailbox") })
	emailNode(t, a, ms, logsA)

	answered := askOn(a.hub, "q-1")
	h, _ := ms.Mail(t, 1)
	id, _ := h.MessageID()
	ms.Reply(t, "ship@mail.example.org", id, "Ship it.\r\n")
	if rep := recv(t, "the agent's answer", answered); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
	waitUntil(t, "the reply marked read", func() bool { return ms.Seen(t)[1] })

	// Answered on B, told on B: B mails the follow-up of A's question.
	h, body := ms.Mail(t, 2)
	irt, _ := h.MsgIDList("In-Reply-To")
	subject, _ := h.Subject()
	if !slices.Equal(irt, []string{id}) || subject != "Re: [agentassistant] Claude Code asks: Deploy?" || !strings.Contains(body, "Answered on ana@example.org") {
		t.Errorf("the follow-up, In-Reply-To %v, %q:\n%s", irt, subject, body)
	}
	ms.Reply(t, "late@mail.example.org", id, "Roll back!\r\n")
	h, body = ms.Mail(t, 3)
	if irt, _ := h.MsgIDList("In-Reply-To"); !slices.Equal(irt, []string{"late@mail.example.org"}) ||
		!strings.Contains(body, "answered already by ana@example.org (E-mail)") {
		t.Errorf("the notice of a late reply, In-Reply-To %v:\n%s", irt, body)
	}
	if logsA.has("watching the mailbox") {
		t.Error("both instances watched the mailbox")
	}
}

// TestEmailReadTwice: a reply taken by instance B, which dies before it
// marks it read, is read again by instance A once it watches the
// mailbox: A tells the person nothing about the answer they gave, which
// was taken; a later reply is told it was not.
func TestEmailReadTwice(t *testing.T) {
	ms := channel.NewMailServers(t)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	logsA, logsB := &lockedLog{}, &lockedLog{}
	mb := emailNode(t, b, ms, logsB)
	waitUntil(t, "B watches the mailbox", func() bool { return logsB.has("email: watching the mailbox") })
	emailNode(t, a, ms, logsA)

	answered := askOn(a.hub, "q-1")
	h, _ := ms.Mail(t, 1)
	id, _ := h.MessageID()
	ms.Reply(t, "ship@mail.example.org", id, "Ship it.\r\n")
	if rep := recv(t, "the agent's answer", answered); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
	waitUntil(t, "the reply marked read", func() bool { return ms.Seen(t)[1] })
	ms.Mail(t, 2) // the follow-up

	ms.Unsee(t, 1) // as though B died before it marked the reply read
	mb.Close()
	waitUntil(t, "A watches the mailbox", func() bool { return logsA.has("email: watching the mailbox") })
	ms.Reply(t, "late@mail.example.org", id, "Roll back!\r\n")
	waitUntil(t, "A looked at both replies", func() bool { s := ms.Seen(t); return s[1] && s[2] })
	// Mails are looked at in order: the notice of the late reply comes
	// after any of the first.
	h, body := ms.Mail(t, 3)
	if irt, _ := h.MsgIDList("In-Reply-To"); !slices.Equal(irt, []string{"late@mail.example.org"}) {
		t.Errorf("the reply taken, read again, was told (In-Reply-To %v):\n%s", irt, body)
	}
	if n := ms.Mails(); n != 3 {
		t.Errorf("%d mails, want the question, its follow-up and the late reply's notice", n)
	}
}

// lockedLog is a log a test reads while it is written.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// has reports whether the log holds s.
func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.b.String(), s)
}

// TestEmailNotTakenToldOnce: a late reply that instance B told was not
// taken, and B died before it marked it read, is read again by instance
// A once it watches the mailbox: A does not tell it again.
func TestEmailNotTakenToldOnce(t *testing.T) {
	ms := channel.NewMailServers(t)
	ns := natstest.Start(t)
	a, b := startNode(t, ns.URL(), "a"), startNode(t, ns.URL(), "b")
	logsA, logsB := &lockedLog{}, &lockedLog{}
	mb := emailNode(t, b, ms, logsB)
	waitUntil(t, "B watches the mailbox", func() bool { return logsB.has("email: watching the mailbox") })
	emailNode(t, a, ms, logsA)

	answered := askOn(a.hub, "q-1")
	h, _ := ms.Mail(t, 1)
	id, _ := h.MessageID()
	ms.Reply(t, "ship@mail.example.org", id, "Ship it.\r\n")
	recv(t, "the agent's answer", answered)
	ms.Mail(t, 2) // the follow-up
	ms.Reply(t, "late@mail.example.org", id, "Roll back!\r\n")
	ms.Mail(t, 3) // B tells the late reply it was not taken
	waitUntil(t, "the late reply marked read", func() bool { return ms.Seen(t)[2] })

	ms.Unsee(t, 2) // as though B died before it marked the reply read
	mb.Close()
	waitUntil(t, "A watches the mailbox", func() bool { return logsA.has("email: watching the mailbox") })
	waitUntil(t, "A looked at the late reply", func() bool { return ms.Seen(t)[2] })
	if n := ms.Mails(); n != 3 {
		_, body := ms.Mail(t, n)
		t.Errorf("%d mails: the late reply was told twice:\n%s", n, body)
	}
}

// TestEmailPhotoTooLargeForCluster: a reply whose photo makes an answer
// larger than NATS's max_payload (1 MiB by default) cannot be saved,
// now or later: it is not tried again and again (the mailbox's later
// replies wait on none), the person is told why by mail, and the
// question stays for a reply without it.
func TestEmailPhotoTooLargeForCluster(t *testing.T) {
	ms := channel.NewMailServers(t)
	ns := natstest.Start(t)
	a := startNode(t, ns.URL(), "a")
	logs := &lockedLog{}
	emailNode(t, a, ms, logs)

	answered := askOn(a.hub, "q-1")
	h, _ := ms.Mail(t, 1)
	id, _ := h.MessageID()
	ms.ReplyWithPhoto(t, id, "Here is the bug.", 900<<10)
	_, body := ms.Mail(t, 2)
	if !strings.Contains(body, "Not taken") || !strings.Contains(body, "too large") {
		t.Errorf("the person was told:\n%s", body)
	}
	waitUntil(t, "the reply marked read", func() bool { return ms.Seen(t)[1] })
	ms.Reply(t, "again@mail.example.org", id, "Ship it.\r\n")
	if rep := recv(t, "the agent's answer", answered); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it." {
		t.Fatalf("the agent got %+v", rep)
	}
}
