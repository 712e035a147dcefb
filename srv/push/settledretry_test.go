package push

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestAskNotTriedAgainOnceSettled: a question's push the push service
// refuses for now (503) is tried again only while the question waits.
// Answered meanwhile (in a cluster, possibly on another instance, whose
// settled push has gone out already), its device is not alerted to it
// again: the next push it gets is the one that closes it.
func TestAskNotTriedAgainOnceSettled(t *testing.T) {
	f := newFixture(t, Options{Backoff: time.Millisecond})
	phone := newDevice(t, "/phone")
	phone.subscribe(t, f.p, f.s, tokA, "Pixel 8 · Chrome")
	f.s.status = func(path string, n int) int {
		if n > 1 {
			return http.StatusCreated
		}
		// Answered while its push is in flight, refused for now.
		if err := f.hub.Answer(context.Background(), tokA, wire.AskQuestion, "q-1", hub.Reply{ClientID: "pc", Nickname: "PC"}); err != nil {
			t.Error(err)
		}
		return http.StatusServiceUnavailable
	}
	answered := f.ask(tokA, "q-1", "Deploy?")
	<-answered
	got := f.s.waitFor(t, "/phone", 2)
	if m := phone.open(t, f.s, got[1]).msg; m.Type != "settled" || m.ID != "q-1" {
		t.Fatalf("after the question was answered the device got %s of %s, want its settled push", m.Type, m.ID)
	}
}
