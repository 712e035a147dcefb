package answercap

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestCapabilityAnswersOnlyTheOptions: a capability of a question that
// offers options without allow_other answers with one of them only; a
// typed answer is refused (400, saying which options), the capability is
// not spent on it and the question stays pending, so the person's next
// tap on an option still answers. So in cluster mode too.
func TestCapabilityAnswersOnlyTheOptions(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	shared, err := NewShared(key, &claims{used: map[string]bool{}}, func(string) (string, bool) { return "tok", true })
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Store{"local": New(), "shared": shared} {
		t.Run(name, func(t *testing.T) {
			h := hub.New(hub.Options{})
			defer h.Close()
			got := make(chan *hub.Reply, 1)
			go func() {
				rep, _ := h.Ask(context.Background(), "tok", hub.Request{Kind: wire.AskQuestion, ID: "q1", Text: "Deploy?", Timeout: time.Hour,
					Questions: []*pb.Question{{Options: []*pb.Option{{Label: "Deploy"}, {Label: "Wait"}}}}})
				got <- rep
			}()
			waitPending(t, h, "q1")
			now := time.Now()
			c := s.Make("tok", Cap{Room: "room", Kind: wire.AskQuestion, ID: "q1", Who: "phone", WhoID: "s1", Door: "ntfy", Expires: now.Add(time.Hour)}, now)
			srv := s.Answer(h, time.Now, slog.New(slog.DiscardHandler), func(*http.Request) {})
			post := func(body string) (int, string) {
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, httptest.NewRequest("POST", "/push/answer", strings.NewReader(body)))
				b, _ := io.ReadAll(rec.Body)
				return rec.Code, string(b)
			}
			if code, body := post(`{"cap":"` + c + `","text":"delete the backups instead"}`); code != http.StatusBadRequest || !strings.Contains(body, `\"Deploy\", \"Wait\"`) {
				t.Fatalf("a typed answer: %d %s, want 400 naming the options", code, body)
			}
			if code, body := post(`{"cap":"` + c + `","text":"Wait"}`); code != http.StatusOK {
				t.Fatalf("the option after the refused answer: %d %s", code, body)
			}
			rep := <-got
			if rep == nil || len(rep.Contents) != 1 || rep.Contents[0].GetText().GetText() != "Wait" {
				t.Fatalf("the agent got %v", rep)
			}
			if code, _ := post(`{"cap":"` + c + `","text":"Deploy"}`); code == http.StatusOK {
				t.Error("the capability answered twice")
			}
		})
	}
}

// waitPending waits until the hub shows the request id.
func waitPending(t *testing.T, h *hub.Hub, id string) {
	t.Helper()
	asked := make(chan struct{}, 1)
	stop := h.Subscribe(func(ev hub.Event) {
		if ev.Kind == hub.Asked && ev.Request.ID == id {
			select {
			case asked <- struct{}{}:
			default:
			}
		}
	})
	defer stop()
	// Shown before the subscription: anything but "not pending" (a
	// question whose options leave "Wait" out refuses it as no option).
	if err := h.Allows(context.Background(), "tok", wire.AskQuestion, id, hub.Reply{Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Text: "Wait"}}}}); !errors.Is(err, hub.ErrNotPending) {
		return
	}
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never asked", id)
	}
}

// TestAnswerBodyIsOneMeaning: a body that gives a key twice (in any
// case, as encoding/json matches keys to fields, the last winning) or
// holds more than one value is refused (400) before the capability is
// looked at; the capability is not spent and answers afterwards.
func TestAnswerBodyIsOneMeaning(t *testing.T) {
	h := hub.New(hub.Options{})
	defer h.Close()
	got := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := h.Ask(context.Background(), "tok", hub.Request{Kind: wire.AskQuestion, ID: "q1", Text: "Deploy?", Timeout: time.Hour})
		got <- rep
	}()
	waitPending(t, h, "q1")
	s := New()
	now := time.Now()
	c := s.Make("tok", Cap{Room: "room", Kind: wire.AskQuestion, ID: "q1", Door: "ntfy", Expires: now.Add(time.Hour)}, now)
	srv := s.Answer(h, time.Now, slog.New(slog.DiscardHandler), func(*http.Request) {})
	post := func(body string) (int, string) {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest("POST", "/push/answer", strings.NewReader(body)))
		return rec.Code, rec.Body.String()
	}
	for _, body := range []string{
		`{"cap":"` + c + `","text":"Wait","text":"Deploy"}`,
		`{"cap":"` + c + `","text":"Wait","Text":"Deploy"}`,
		`{"cap":"` + c + `","text":"Wait","TEXT":"Deploy"}`,
		`{"cap":"` + c + `","text":"Wait","\u0074ext":"Deploy"}`,
		`{"cap":"made-up","CAP":"` + c + `","text":"Wait"}`,
		`{"cap":"` + c + `","text":"Wait"}{"cap":"x"}`,
	} {
		if code, why := post(body); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", body, code, why)
		}
	}
	if code, why := post(`{"cap":"` + c + `","text":"Wait"}`); code != http.StatusOK {
		t.Fatalf("the capability after the refused bodies: %d %s", code, why)
	}
	if rep := <-got; rep == nil || rep.Contents[0].GetText().GetText() != "Wait" {
		t.Fatalf("the agent got %v", rep)
	}
}

// TestCapabilityAnswersWithTheLabelAsSent: a button posts its option's
// label as it is, spaces around it included (an agent may offer " Yes "):
// the answer is that option, not a typed " Yes" cut to "Yes" and refused
// as no option.
func TestCapabilityAnswersWithTheLabelAsSent(t *testing.T) {
	h := hub.New(hub.Options{})
	defer h.Close()
	asked := make(chan struct{}, 1)
	stop := h.Subscribe(func(ev hub.Event) {
		if ev.Kind == hub.Asked {
			select {
			case asked <- struct{}{}:
			default:
			}
		}
	})
	defer stop()
	got := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := h.Ask(context.Background(), "tok", hub.Request{Kind: wire.AskQuestion, ID: "q1", Text: "Deploy?", Timeout: time.Hour,
			Questions: []*pb.Question{{Options: []*pb.Option{{Label: " Wait "}, {Label: "Deploy"}}}}})
		got <- rep
	}()
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("never asked")
	}
	s := New()
	now := time.Now()
	c := s.Make("tok", Cap{Room: "room", Kind: wire.AskQuestion, ID: "q1", Door: "ntfy", Expires: now.Add(time.Hour)}, now)
	rec := httptest.NewRecorder()
	s.Answer(h, time.Now, slog.New(slog.DiscardHandler), func(*http.Request) {}).ServeHTTP(rec,
		httptest.NewRequest("POST", "/push/answer", strings.NewReader(`{"cap":"`+c+`","text":" Wait "}`)))
	if rec.Code != http.StatusOK {
		t.Fatalf("the label as sent: %d %s", rec.Code, rec.Body)
	}
	if rep := <-got; rep == nil || rep.Contents[0].GetText().GetText() != " Wait " {
		t.Fatalf("the agent got %v", rep)
	}
}

// TestCapabilityAnswersOnlyWhatItOffers: a capability made for a
// notification's buttons (Cap.Answers) answers with those texts only. A
// question that takes several of its options shows none of them as a
// button, so its capability must not answer with one option alone, even
// one the question would take: 400, the capability kept, the question
// pending; the button it offers still answers. So in cluster mode too.
func TestCapabilityAnswersOnlyWhatItOffers(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	shared, err := NewShared(key, &claims{used: map[string]bool{}}, func(string) (string, bool) { return "tok", true })
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Store{"local": New(), "shared": shared} {
		t.Run(name, func(t *testing.T) {
			h := hub.New(hub.Options{})
			defer h.Close()
			got := make(chan *hub.Reply, 1)
			go func() {
				rep, _ := h.Ask(context.Background(), "tok", hub.Request{Kind: wire.AskQuestion, ID: "q1", Text: "Which to deploy?", Timeout: time.Hour,
					Questions: []*pb.Question{{Multiple: true, Custom: true, Options: []*pb.Option{{Label: "Wait"}, {Label: "Web"}, {Label: "API"}}}}})
				got <- rep
			}()
			waitPending(t, h, "q1")
			now := time.Now()
			c := s.Make("tok", Cap{Room: "room", Kind: wire.AskQuestion, ID: "q1", Who: "phone", WhoID: "s1", Door: "push",
				Expires: now.Add(time.Hour), Answers: []string{"Not now"}}, now)
			srv := s.Answer(h, time.Now, slog.New(slog.DiscardHandler), func(*http.Request) {})
			post := func(body string) (int, string) {
				rec := httptest.NewRecorder()
				srv.ServeHTTP(rec, httptest.NewRequest("POST", "/push/answer", strings.NewReader(body)))
				return rec.Code, rec.Body.String()
			}
			for _, text := range []string{"Web", "Web, API", "anything typed"} {
				if code, body := post(`{"cap":"` + c + `","text":"` + text + `"}`); code != http.StatusBadRequest {
					t.Errorf("%q through a capability that offers only \"Not now\": %d %s, want 400", text, code, body)
				}
			}
			if code, body := post(`{"cap":"` + c + `","text":"Not now"}`); code != http.StatusOK {
				t.Fatalf("the offered answer: %d %s", code, body)
			}
			if rep := <-got; rep == nil || rep.Contents[0].GetText().GetText() != "Not now" {
				t.Fatalf("the agent got %v", rep)
			}
		})
	}
}
