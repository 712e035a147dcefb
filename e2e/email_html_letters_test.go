package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// TestEmailHTMLReplyInTurkish: the person answers a question's mail
// from a mail program that writes HTML alone, in Turkish, without
// quoting the question: its capital İ is shorter in lower case, which
// once threw the reading of the reply's tags off and panicked the
// server's mailbox watch, the server dying at every look at the reply.
// The agent has the answer as written, from the server still running.
func TestEmailHTMLReplyInTurkish(t *testing.T) {
	sink := startMailSink(t)
	box := startMailbox(t)
	s := startSingle(t, freePort(t), t.TempDir(), emailConfig(sink, box))
	agent := startMCP(t, s, tokenA)
	done := askAsync(agent, "Deploy build 7?")
	asked := messageID(sink.question(t, "Deploy build 7?"))
	answer := "İyi, İlerle: İzmir İçin İşi İptal Etme, İstanbul İçin İleri."
	box.deliver(t, fmt.Sprintf("From: %s\r\nTo: %s\r\nSubject: Re: the question\r\nMessage-ID: <reply-tr@example.org>\r\n"+
		"In-Reply-To: <%s>\r\nReferences: <%s>\r\nContent-Type: text/html; charset=utf-8\r\n\r\n"+
		"<html><body><div>%s</div></body></html>\r\n",
		mailPerson, mailAA, asked, asked, answer))
	wantAnswer(t, done, answer)
	if strings.Contains(s.logw.String(), "panic") {
		t.Errorf("the server panicked:\n%s", s.logw.String())
	}
}
