package channel

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestFollowUpAfterRestartNamesTheChoice: a follow-up owed when the
// server stopped (ntfy, the SMTP server out of reach as the question
// was answered) is made after the restart from its note, and says what
// was chosen, as one made at once does: an option (which the note does
// not otherwise keep) or a quick reply.
func TestFollowUpAfterRestartNamesTheChoice(t *testing.T) {
	for _, tc := range []struct {
		name, answer, want string
		qs                 []*pb.Question
	}{
		{"an option", "Canary", "Answered on Ana: Canary", []*pb.Question{{Options: []*pb.Option{{Label: "Blue-green"}, {Label: "Canary"}}}}},
		{"a quick reply", "Go ahead", "Answered on Ana: Go ahead", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, notes, _, _ := owedSetup(t)
				d := &ntfyDouble{}
				nt := &Ntfy{URL: "http://ntfy.test", Topic: "t", Client: &http.Client{Transport: d}}
				p := newPipeSMTP(t)
				e := &Email{SMTPAddr: "pipe:25", From: "Agent Assistant <" + aaAddr + ">", To: []string{"ana@example.org"}, TLS: "none", dial: p.ln.Dial}
				routes := map[string][]Channel{tokA: {nt, e}}
				m := New(Options{Hub: h, Routes: routes, Notes: notes, Tries: 1, Backoff: time.Second})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				go func() {
					_, _ = h.Ask(ctx, tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Which rollout?", Questions: tc.qs, Timeout: 2 * time.Hour})
				}()
				synctest.Wait()
				d.setDown(true)
				p.setDown(true)
				if err := h.Answer(ctx, tokA, wire.AskQuestion, "q-1", hub.Reply{Contents: []*pb.McpResultContent{textContent(tc.answer)}, ClientID: "ws:ana", Nickname: "Ana"}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				m.Close() // stopped with both follow-ups owed
				d.setDown(false)
				p.setDown(false)

				m = New(Options{Hub: h, Routes: routes, Notes: notes, AfterRestore: true})
				defer m.Close()
				m.Restored()
				time.Sleep(owedMaxWait)
				synctest.Wait()
				if made, _ := d.settled(); !slices.Equal(made, []string{tc.want}) {
					t.Errorf("ntfy's follow-up after the restart: %q, want %q", made, tc.want)
				}
				if mailed := p.followUps(); len(mailed) != 1 || !strings.Contains(mailed[0], tc.want) {
					t.Errorf("the mailed follow-up after the restart: %q, want one saying %q", mailed, tc.want)
				}
			})
		})
	}
}
