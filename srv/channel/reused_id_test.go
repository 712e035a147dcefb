package channel

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestOldButtonDoesNotAnswerANewQuestionOfItsID: an agent may ask again
// under an ID it used before, once the first question's outcome is no
// longer kept (it chooses its IDs, to re-attach by them). The first
// question's ntfy notification may still be shown: its button, whose
// capability the server signed (as every server does, so that it
// outlives a restart), must not answer the new question, which the
// person never saw. The new notification's button answers it.
func TestOldButtonDoesNotAnswerANewQuestionOfItsID(t *testing.T) {
	yesNo := []*pb.Option{{Label: "Yes"}, {Label: "No"}}
	oldButtonAfterReuse(t, "Drop the **staging** database?", yesNo, "Drop the **production** database?", yesNo)
}

// TestOldButtonDoesNotAnswerANewlyDescribedQuestion: the question asked
// again under its ID has the same text and labels, but its options say
// otherwise what they mean, as the notification shows them: a tap made
// reading the first must not answer the second.
func TestOldButtonDoesNotAnswerANewlyDescribedQuestion(t *testing.T) {
	const text = "Drop the database?"
	oldButtonAfterReuse(t,
		text, []*pb.Option{{Label: "Yes", Description: "the staging one"}, {Label: "No"}},
		text, []*pb.Option{{Label: "Yes", Description: "the production one"}, {Label: "No"}})
}

// oldButtonAfterReuse asks the first question, withdraws it and lets its
// outcome go, asks the second under the same ID, and checks that the
// first one's Yes button does not answer it and its own does.
func oldButtonAfterReuse(t *testing.T, firstText string, firstOpts []*pb.Option, secondText string, secondOpts []*pb.Option) {
	t.Helper()
	// An outcome is kept no longer than it takes to settle: the ID is
	// free again at once.
	h := hub.New(hub.Options{RetentionBytes: 1})
	t.Cleanup(h.Close)
	key, err := answercap.LoadOrCreateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	caps, err := answercap.NewShared(key, answercap.NewMemoryClaims(nil), func(room string) (string, bool) {
		return tokA, room == store.Room(tokA)
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /push/answer", caps.Answer(h, time.Now, slog.New(slog.DiscardHandler), func(*http.Request) {}))
	public := httptest.NewServer(mux)
	t.Cleanup(public.Close)
	ntfy := newReceiver(t)
	m := New(Options{Hub: h, Caps: caps, PublicURL: public.URL,
		Routes: map[string][]Channel{tokA: {&Ntfy{URL: ntfy.URL, Topic: "aa-secret-topic"}}}})
	t.Cleanup(m.Close)

	ask := func(id, text string, opts []*pb.Option) chan error {
		out := make(chan error, 1)
		go func() {
			_, err := h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: id, Text: text,
				ProjectDirectory: "/home/ana/shop", Timeout: time.Hour,
				Questions: []*pb.Question{{Options: opts}}})
			out <- err
		}()
		return out
	}
	// published is the n-th message published, which must ask text; its
	// Yes button's post.
	published := func(n int, text string) string {
		t.Helper()
		_, bodies := ntfy.waitFor(t, n)
		var msg ntfyMessage
		if err := json.Unmarshal(bodies[n-1], &msg); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(msg.Message, text) || len(msg.Actions) == 0 {
			t.Fatalf("published %+v, want %q with its buttons", msg, text)
		}
		return msg.Actions[0].Body
	}
	post := func(body string) int {
		t.Helper()
		resp, err := http.Post(public.URL+"/push/answer", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	withdraw := func(id string, asked chan error, n int) {
		t.Helper()
		if err := h.Cancel(context.Background(), tokA, id); err != nil {
			t.Fatal(err)
		}
		if err := <-asked; !errors.Is(err, hub.ErrWithdrawn) {
			t.Fatalf("question %s ended with %v, want withdrawn", id, err)
		}
		ntfy.waitFor(t, n) // the withdrawal told
	}

	first := ask("drop-db", firstText, firstOpts)
	old := published(1, firstText)
	withdraw("drop-db", first, 2)
	// Another question settled: the first one's outcome is let go.
	other := ask("other", "Go on?", nil)
	published(3, "Go on?")
	withdraw("other", other, 4)

	second := ask("drop-db", secondText, secondOpts)
	shown := published(5, secondText)
	if code := post(old); code == http.StatusOK {
		t.Fatalf("the first question's button answered the second one (%d)", code)
	}
	if code := post(shown); code != http.StatusOK {
		t.Fatalf("the production question's own button: %d, want 200", code)
	}
	if err := <-second; err != nil {
		t.Fatalf("the second question: %v", err)
	}
}
