package answercap

import (
	"context"
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

// TestSignedCapabilityOfTheLongestFieldsAnswers: a cluster's capability
// carries what it stands for, signed; made for a question, a device and
// buttons of the longest the server takes, each of characters JSON
// writes in six bytes (a request ID of 128 bytes, a device name of 64,
// three buttons of 40), it still answers: its name is no longer than
// what is read of one before the check (maxSigned), nor its post than
// an answer's (maxAnswer).
func TestSignedCapabilityOfTheLongestFieldsAnswers(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	s, err := NewShared(key, &claims{used: map[string]bool{}}, func(string) (string, bool) { return "tok", true })
	if err != nil {
		t.Fatal(err)
	}
	h := hub.New(hub.Options{})
	defer h.Close()
	id := strings.Repeat("<", 128)
	labels := []string{strings.Repeat("<", 40), strings.Repeat("&", 40), strings.Repeat(">", 40)}
	opts := make([]*pb.Option, len(labels))
	for i, l := range labels {
		opts[i] = &pb.Option{Label: l}
	}
	got := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := h.Ask(context.Background(), "tok", hub.Request{Kind: wire.AskQuestion, ID: id, Text: "Which?", Timeout: time.Hour,
			Questions: []*pb.Question{{Options: opts}}})
		got <- rep
	}()
	waitPending(t, h, id)
	now := time.Now()
	c := s.Make("tok", Cap{Room: strings.Repeat("f", 32), Kind: wire.AskQuestion, ID: id, Who: strings.Repeat("\x01", 64),
		WhoID: strings.Repeat("s", 22), Door: "push", Expires: now.Add(24 * time.Hour), Answers: labels}, now)
	body := `{"cap":"` + c + `","text":"` + labels[1] + `"}`
	if len(c) > maxSigned || len(body) > maxAnswer {
		t.Errorf("the capability's name is %d bytes (read: %d), its post %d (read: %d)", len(c), maxSigned, len(body), maxAnswer)
	}
	rec := httptest.NewRecorder()
	s.Answer(h, time.Now, slog.New(slog.DiscardHandler), func(*http.Request) {}).
		ServeHTTP(rec, httptest.NewRequest("POST", "/push/answer", strings.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("the button answered %d %s, want 200", rec.Code, rec.Body)
	}
	if rep := <-got; rep == nil || rep.Contents[0].GetText().GetText() != labels[1] {
		t.Fatalf("the agent got %v", rep)
	}
}
