package channel

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// ntfyPosts is an ntfy service in process: it keeps what each publish
// was, "asked <id>" for a question and "settled <id>" for a follow-up.
type ntfyPosts struct {
	mu  sync.Mutex
	got []string
}

func (p *ntfyPosts) RoundTrip(r *http.Request) (*http.Response, error) {
	var m struct {
		Seq  string   `json:"sequence_id"`
		Tags []string `json:"tags"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		return nil, err
	}
	what := "settled"
	if slices.Contains(m.Tags, "question") {
		what = "asked"
	}
	p.mu.Lock()
	p.got = append(p.got, what+" "+m.Seq)
	p.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"id":"x"}`)), Request: r}, nil
}

func (p *ntfyPosts) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

// unwritableNotes are a cluster's notes in memory whose Put fails while
// full is set (its store refusing writes, long enough that the notes
// kept to be written later are past their bound); Create, Get and
// Delete answer.
type unwritableNotes struct {
	scanNotes
	full atomic.Bool
}

func (u *unwritableNotes) Put(ctx context.Context, key string, value []byte, until time.Time) error {
	if u.full.Load() {
		return errNoQuorum
	}
	return u.scanNotes.Put(ctx, key, value, until)
}

// fillLater has m's notes keep as many notes to be written later as
// they keep at most, so that a write the store refuses now is refused
// to its caller.
func fillLater(t *testing.T, m *Manager) {
	t.Helper()
	for i := range maxLaterNotes {
		if err := m.o.Notes.Put(t.Context(), "earlier."+strconv.Itoa(i), []byte("{}"), time.Now().Add(time.Hour)); err != nil {
			t.Fatalf("note %d not kept: %v", i, err)
		}
	}
	if err := m.o.Notes.Put(t.Context(), "one more", []byte("{}"), time.Now().Add(time.Hour)); !errors.Is(err, errNoQuorum) {
		t.Fatalf("a note past the bound: %v, want refused", err)
	}
}

// notLeading is a Leader that never leads here: another instance holds
// every lease.
type notLeading struct{}

func (notLeading) Lead(ctx context.Context, _ string, _ func(context.Context)) { <-ctx.Done() }

// settledElsewhere notes q's follow-up on nt owed, as the instance that
// settled q notes it before q was noted sent (Unsent), no send of it seen
// claimed then.
func settledElsewhere(t *testing.T, notes Notes, nt *Ntfy, id string) {
	t.Helper()
	now := time.Now()
	rec := sentRecord{Room: store.Room(tokA), ID: id, Channel: nt.Name(), ReqKind: wire.AskQuestion,
		Kind: hub.Answered, Nick: "Ana", At: now, Since: now, Unsent: true}
	b, _ := json.Marshal(rec)
	if err := notes.Put(t.Context(), owedPrefix+sentNoteKey(rec.Room, id, 0, nt.Name()), b, now.Add(owedFor)); err != nil {
		t.Fatal(err)
	}
}

func yes() hub.Reply {
	return hub.Reply{Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Yes"}}}, ClientID: "ws:Ana", Nickname: "Ana"}
}

// TestFollowUpWaitsWhenItsClaimSeenCannotBeNoted: a question settled
// elsewhere before it was noted sent, whose send another instance claims
// now, is followed up once that send is noted or its claim lapsed; the
// follow-up notes that it saw the claim. That note failing to be written
// (the notes' store refusing writes) was taken for a failed delivery:
// the notice tried again and again, and the channel marked down, its
// next notices tried once each. It waits as a failed read of the claim
// does.
func TestFollowUpWaitsWhenItsClaimSeenCannotBeNoted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := hub.New(hub.Options{})
		defer h.Close()
		notes := &unwritableNotes{scanNotes: scanNotes{NewMemoryNotes(nil)}}
		svc := &ntfyPosts{}
		nt := &Ntfy{URL: "https://ntfy.example", Topic: "aa-topic", Client: &http.Client{Transport: svc}}
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {nt}}, Notes: notes, Leader: notLeading{},
			Logger: slog.New(slog.DiscardHandler), Tries: 2, Backoff: time.Second})
		defer m.Close()

		// Another instance settled q-1 and noted its follow-up owed; now
		// one told the question again claims its send.
		settledElsewhere(t, notes, nt, "q-1")
		if _, err := notes.Create(t.Context(), askingKey(nt, Notice{Event: hub.Event{Token: tokA, Request: hub.Request{ID: "q-1"}}}), []byte("b again"), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		notes.full.Store(true)
		fillLater(t, m)

		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			_, _ = h.Ask(ctx, tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?", Timeout: time.Hour})
		}()
		synctest.Wait()
		if err := h.Answer(t.Context(), tokA, wire.AskQuestion, "q-1", yes()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := svc.all(); len(got) != 0 {
			t.Errorf("ntfy was published %q while the question's send was claimed", got)
		}
		if st := m.States(); len(st) != 1 || st[0].State != "ok" {
			t.Errorf("the channel is %+v, want ok: no notice failed to go out", st)
		}
		if Owing(m) != 1 {
			t.Errorf("%d follow-ups owed, want q-1's, waiting for its question", Owing(m))
		}
	})
}

// TestAskerLetsGoOfItsClaimOnAQuestionSettled: the instance that asked
// a question, its queue slow, comes to send it after another instance
// settled it and noted the follow-up owed before any send of it was
// noted, and was killed before it looked at it. The asker sends nothing,
// as it should; but it kept its claim on the send until the claim
// lapsed, and the lease holder, finding the follow-up owed, took the
// claim for a send that may have gone out: once it lapsed, the
// follow-up was made, an outcome of a question ntfy was never sent.
func TestAskerLetsGoOfItsClaimOnAQuestionSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := hub.New(hub.Options{})
		defer h.Close()
		notes := scanNotes{NewMemoryNotes(nil)}
		svc := &ntfyPosts{}
		nt := &Ntfy{URL: "https://ntfy.example", Topic: "aa-topic", Client: &http.Client{Transport: svc}}
		o := Options{Hub: h, Routes: map[string][]Channel{tokA: {nt}}, Notes: notes, Logger: slog.New(slog.DiscardHandler)}
		o.owedScan = 10 * time.Second // within a claim's time (askingFor)
		// It holds ntfy's lease, alone.
		m := New(o)
		defer m.Close()
		synctest.Wait() // its first read of the follow-ups owed found none

		settledElsewhere(t, notes, nt, "q-1")
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			_, _ = h.Ask(ctx, tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?", Timeout: time.Hour})
		}()
		synctest.Wait()
		claim := askingKey(nt, Notice{Event: hub.Event{Token: tokA, Request: hub.Request{ID: "q-1"}}})
		if _, held, _ := notes.Get(t.Context(), claim); held {
			t.Errorf("the asker keeps its claim on sending q-1, settled")
		}
		time.Sleep(askingFor + 2*time.Minute) // read again, any claim lapsed, the follow-up's waits over
		synctest.Wait()
		if got := svc.all(); len(got) != 0 {
			t.Errorf("ntfy was published %q, want nothing: q-1 was settled before it was sent", got)
		}
		if Owing(m) != 0 {
			t.Errorf("%d follow-ups owed, want none", Owing(m))
		}
	})
}
