package channel

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/agentassistant/agentassistant/internal/pipenet"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// ntfyDouble is an ntfy server inside a synctest bubble (an
// http.RoundTripper): it keeps the messages published, and refuses
// them while down.
type ntfyDouble struct {
	mu    sync.Mutex
	down  bool
	tries int
	made  []ntfyMessage
}

func (d *ntfyDouble) RoundTrip(req *http.Request) (*http.Response, error) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	var m ntfyMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tries++
	if d.down {
		return nil, errors.New("connection refused")
	}
	d.made = append(d.made, m)
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

func (d *ntfyDouble) setDown(down bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = down
}

// settled are the titles of the notifications made that replace a
// question's, and how many publishes were tried.
func (d *ntfyDouble) settled() (titles []string, tries int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range d.made {
		if len(m.Actions) == 0 && m.Priority == 2 {
			titles = append(titles, m.Title)
		}
	}
	return titles, d.tries
}

// TestNtfyFollowUpOwed: a question settled while ntfy is out of reach
// has its notification replaced once ntfy is back (tried again, spaced
// out), once; and a server started again on the same notes does not
// replace it a second time.
func TestNtfyFollowUpOwed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, notes, ask, answer := owedSetup(t)
		d := &ntfyDouble{}
		nt := &Ntfy{URL: "http://ntfy.test", Topic: "t", Client: &http.Client{Transport: d}}
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {nt}}, Notes: notes, Tries: 2, Backoff: time.Second})
		ask()
		d.setDown(true)
		answer()
		time.Sleep(time.Hour)
		synctest.Wait()
		if made, _ := d.settled(); len(made) != 0 {
			t.Fatalf("replaced while down: %q", made)
		}
		d.setDown(false)
		time.Sleep(owedMaxWait)
		synctest.Wait()
		made, tries := d.settled()
		if !slices.Equal(made, []string{"Answered on Ana: Yes"}) {
			t.Fatalf("notifications replaced once ntfy is back: %q", made)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if _, again := d.settled(); again != tries {
			t.Errorf("published %d more times once replaced", again-tries)
		}
		m.Close()

		m = New(Options{Hub: h, Routes: map[string][]Channel{tokA: {nt}}, Notes: notes, AfterRestore: true})
		m.Restored()
		synctest.Wait()
		m.Close()
		if _, again := d.settled(); again != tries {
			t.Errorf("replaced again after a restart: %d publishes", again-tries)
		}
	})
}

// pipeSMTP is an SMTP server on an in-memory network, for a synctest
// bubble: it keeps the mails it is given, and refuses them while down.
type pipeSMTP struct {
	ln    *pipenet.Listener
	mu    sync.Mutex
	down  bool
	mails []string
}

func newPipeSMTP(t *testing.T) *pipeSMTP {
	p := &pipeSMTP{ln: pipenet.New()}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &pipeSession{p: p}, nil }))
	srv.Domain, srv.AllowInsecureAuth, srv.ErrorLog = "localhost", true, discardLog{}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(p.ln) }() // ended by Cleanup's Close
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return p
}

func (p *pipeSMTP) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

// followUps are the mails sent that follow a question up.
func (p *pipeSMTP) followUps() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.mails {
		if strings.Contains(m, "No reply is needed any more") {
			out = append(out, m)
		}
	}
	return out
}

type pipeSession struct{ p *pipeSMTP }

func (s *pipeSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *pipeSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(string, string, string) error { return nil }), nil
}
func (s *pipeSession) Mail(string, *smtp.MailOptions) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if s.p.down {
		return &smtp.SMTPError{Code: 421, Message: "service not available"}
	}
	return nil
}
func (s *pipeSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *pipeSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.mails = append(s.p.mails, string(b))
	return nil
}
func (s *pipeSession) Reset()        {}
func (s *pipeSession) Logout() error { return nil }

// TestEmailFollowUpOwed: a question settled while the SMTP server is
// out of reach has its follow-up mailed once the server is back, once,
// saying how it was settled; a server started again on the same notes
// does not mail it a second time.
func TestEmailFollowUpOwed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, notes, ask, answer := owedSetup(t)
		p := newPipeSMTP(t)
		e := &Email{SMTPAddr: "pipe:25", From: "Agent Assistant <" + aaAddr + ">", To: []string{"ana@example.org"}, TLS: "none", dial: p.ln.Dial}
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {e}}, Notes: notes, Tries: 2, Backoff: time.Second})
		ask()
		p.setDown(true)
		answer()
		time.Sleep(time.Hour)
		synctest.Wait()
		if sent := p.followUps(); len(sent) != 0 {
			t.Fatalf("mailed while down: %q", sent)
		}
		p.setDown(false)
		time.Sleep(owedMaxWait)
		synctest.Wait()
		sent := p.followUps()
		if len(sent) != 1 || !strings.Contains(sent[0], "Answered on Ana") {
			t.Fatalf("follow-ups mailed once the server is back: %q", sent)
		}
		m.Close()

		m = New(Options{Hub: h, Routes: map[string][]Channel{tokA: {e}}, Notes: notes, AfterRestore: true})
		m.Restored()
		time.Sleep(time.Hour)
		synctest.Wait()
		m.Close()
		if again := p.followUps(); len(again) != 1 {
			t.Errorf("follow-ups mailed after a restart: %d", len(again))
		}
	})
}

// TestFollowUpAfterRestartTellsTheOutcome: a server stopped right after
// a question was settled, before it heard of it, follows it up after
// its restart with the outcome, not as "no longer pending".
func TestFollowUpAfterRestartTellsTheOutcome(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		settle     func(h *hub.Hub)
	}{
		{"withdrawn", "Withdrawn", func(h *hub.Hub) {
			if err := h.Cancel(context.Background(), tokA, "q-1"); err != nil {
				t.Fatal(err)
			}
		}},
		{"timed out", "Timed out", func(*hub.Hub) { time.Sleep(time.Hour) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, notes, ask, _ := owedSetup(t)
				before := &editor{}
				m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {before}}, Notes: notes})
				ask()
				m.Close() // killed: the settle is not heard
				tc.settle(h)
				synctest.Wait()

				after := &editor{}
				m = New(Options{Hub: h, Routes: map[string][]Channel{tokA: {after}}, Notes: notes, AfterRestore: true})
				defer m.Close()
				m.Restored()
				time.Sleep(owedWait)
				synctest.Wait()
				if _, made := after.state(); !slices.Equal(made, []string{tc.want}) {
					t.Fatalf("follow-ups made after the restart: %q, want %q", made, tc.want)
				}
			})
		})
	}
}

// TestFollowUpHeardTwiceMadeOnce: a settle heard by the queue after a
// restart's restoreOwed owed it already (a request timed out as it is
// restored) is followed up once.
func TestFollowUpHeardTwiceMadeOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, notes, ask, answer := owedSetup(t)
		before := &editor{}
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {before}}, Notes: notes})
		ask()
		m.Close()
		answer()
		synctest.Wait()

		after := &editor{}
		m = New(Options{Hub: h, Routes: map[string][]Channel{tokA: {after}}, Notes: notes, AfterRestore: true})
		defer m.Close()
		m.Restored()
		synctest.Wait()
		// The same settle, heard again (as an event of the restore).
		m.enqueue(hub.Event{Kind: hub.Answered, Token: tokA, At: time.Now(),
			Request: hub.Request{Kind: wire.AskQuestion, ID: "q-1"}, Reply: &hub.Reply{Nickname: "Ana"}}, 0, after)
		time.Sleep(time.Hour)
		synctest.Wait()
		if _, made := after.state(); !slices.Equal(made, []string{"Answered on Ana: Yes"}) {
			t.Fatalf("follow-ups made: %q, want one", made)
		}
	})
}

// TestNtfyFollowUpAfterRestartReplacesTheQuestion: a question settled
// while the server was down (or whose follow-up was owed when it
// stopped) is followed up after the restart under the question's own
// sequence ID, so the notification ntfy replaces is the question's, its
// buttons with it, rather than a second one left beside them; and, as
// one made before the restart, it opens the app.
func TestNtfyFollowUpAfterRestartReplacesTheQuestion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, notes, ask, answer := owedSetup(t)
		d := &ntfyDouble{}
		nt := &Ntfy{URL: "http://ntfy.test", Topic: "t", Client: &http.Client{Transport: d}}
		caps := answercap.New() // the key kept in the data directory: the same after the restart
		const app = "https://aa.example.org"
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {nt}}, Notes: notes, Caps: caps, PublicURL: app})
		ask()
		m.Close() // killed: the answer is not heard
		answer()
		synctest.Wait()

		m = New(Options{Hub: h, Routes: map[string][]Channel{tokA: {nt}}, Notes: notes, Caps: caps, PublicURL: app, AfterRestore: true})
		defer m.Close()
		m.Restored()
		time.Sleep(owedWait)
		synctest.Wait()
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.made) != 2 {
			t.Fatalf("published %d messages, want the question and its follow-up", len(d.made))
		}
		if q, f := d.made[0].SequenceID, d.made[1].SequenceID; q == "" || f != q {
			t.Errorf("the follow-up's sequence ID is %q, the question's %q: ntfy keeps both notifications", f, q)
		}
		if c := d.made[1].Click; c != app+"/" {
			t.Errorf("the follow-up opens %q, not the app", c)
		}
	})
}
