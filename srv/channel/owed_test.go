package channel

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// editor is a channel that edits its message once a question is
// settled (as Telegram and Slack do): it records the edits made, and
// refuses them while down.
type editor struct {
	mu    sync.Mutex
	down  bool
	tries int
	made  []string // the settled lines of the edits made
}

func (*editor) Name() string    { return "editor" }
func (*editor) followsUp() bool { return true }
func (e *editor) Send(_ context.Context, n Notice) error {
	if n.Kind == hub.Asked {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tries++
	if e.down {
		return errors.New("the service is out of reach")
	}
	e.made = append(e.made, title(n))
	return nil
}

func (e *editor) setDown(down bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.down = down
}

func (e *editor) state() (tries int, made []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tries, slices.Clone(e.made)
}

// owedSetup is a hub and one process's notes on disk; ask asks the
// question q-1 of tokA (once a Manager follows the hub), answer answers
// it.
func owedSetup(t *testing.T) (h *hub.Hub, notes *FileNotes, ask, answer func()) {
	t.Helper()
	notes, err := OpenFileNotes(t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = notes.Close() })
	h = hub.New(hub.Options{})
	t.Cleanup(h.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ask = func() {
		go func() {
			_, _ = h.Ask(ctx, tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?", Timeout: time.Hour})
		}()
		synctest.Wait()
	}
	answer = func() {
		err := h.Answer(ctx, tokA, wire.AskQuestion, "q-1", hub.Reply{Contents: []*pb.McpResultContent{textContent("Yes")}, ClientID: "ws:ana", Nickname: "Ana"})
		if err != nil {
			t.Fatal(err)
		}
	}
	return h, notes, ask, answer
}

// TestEditOwedTriedUntilTheServiceIsBack: a settled question's edit that
// failed every try (the service out of reach) is tried again, spaced
// out, until it goes through once the service is back; then no more.
func TestEditOwedTriedUntilTheServiceIsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, notes, ask, answer := owedSetup(t)
		ed := &editor{}
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {ed}}, Notes: notes, Tries: 2, Backoff: time.Second})
		defer m.Close()
		ask()
		ed.setDown(true)
		answer()
		time.Sleep(time.Hour) // the service stays away an hour
		synctest.Wait()
		tries, made := ed.state()
		if len(made) != 0 {
			t.Fatalf("edited while down: %q", made)
		}
		// Two tries, then spaced out up to owedMaxWait: a few dozen, not
		// thousands.
		if tries < 5 || tries > 2+int(time.Hour/owedMaxWait)+12 {
			t.Errorf("tried %d times in an hour", tries)
		}
		ed.setDown(false)
		time.Sleep(owedMaxWait)
		synctest.Wait()
		tries, made = ed.state()
		if !slices.Equal(made, []string{"Answered on Ana: Yes"}) {
			t.Fatalf("edits made once the service is back: %q", made)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if again, _ := ed.state(); again != tries {
			t.Errorf("tried %d more times once edited", again-tries)
		}
	})
}

// TestEditOwedGivenUp: an edit the service never takes is given up after
// owedFor, and the log says so.
func TestEditOwedGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, notes, ask, answer := owedSetup(t)
		ed := &editor{}
		var log syncBuffer
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {ed}}, Notes: notes, Tries: 1,
			Logger: slog.New(slog.NewTextHandler(&log, nil))})
		defer m.Close()
		ask()
		ed.setDown(true)
		answer()
		time.Sleep(owedFor - time.Hour)
		synctest.Wait()
		if strings.Contains(log.String(), "given up") {
			t.Fatal("given up before owedFor")
		}
		time.Sleep(time.Hour + owedMaxWait)
		synctest.Wait()
		if !strings.Contains(log.String(), "not made: given up") {
			t.Fatalf("the log never said the edit was given up:\n%s", log.String())
		}
		tries, _ := ed.state()
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		if again, _ := ed.state(); again != tries {
			t.Errorf("tried %d more times once given up", again-tries)
		}
	})
}

// TestEditOwedAfterRestart: a server stopped before it edited a settled
// question's message (the edit failed, or the server died before it
// heard of the answer) makes the edit once started again.
func TestEditOwedAfterRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		heard bool // the first server heard of the answer (its edit failed)
	}{{"edit failed", true}, {"answer not heard", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, notes, ask, answer := owedSetup(t)
				before := &editor{down: true}
				m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {before}}, Notes: notes, Tries: 1})
				ask()
				if !tc.heard {
					m.Close()
				}
				answer()
				synctest.Wait()
				m.Close()

				after := &editor{}
				m = New(Options{Hub: h, Routes: map[string][]Channel{tokA: {after}}, Notes: notes, AfterRestore: true})
				m.Restored()
				synctest.Wait()
				if _, made := after.state(); !slices.Equal(made, []string{"Answered on Ana: Yes"}) {
					t.Fatalf("edits made after the restart: %q", made)
				}
				m.Close()
				again := &editor{}
				m = New(Options{Hub: h, Routes: map[string][]Channel{tokA: {again}}, Notes: notes, AfterRestore: true})
				m.Restored()
				synctest.Wait()
				m.Close()
				if tries, _ := again.state(); tries != 0 {
					t.Errorf("the edit made is owed again after the next restart: %d tries", tries)
				}
			})
		})
	}
}
