package hub

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// namesOf maps the pending list's task reports to whether the older
// generation asked them.
func namesOf(h *Hub, token string) map[string]bool {
	out := map[string]bool{}
	for _, p := range pendingOf(h, token) {
		if p.Request.Kind == wire.TaskFinish {
			out[p.Request.ID] = p.Request.TaskFinishEra
		}
	}
	return out
}

// TestPendingReportKeepsItsGeneration: the pending list says which
// generation asked a task report (TaskFinishEra: through the older RPC),
// for the /ws door to name it as that generation's apps do, and it
// survives a restart with the request.
func TestPendingReportKeepsItsGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, restart := restartable(t)
		ctx, cancel := context.WithCancel(context.Background())
		for _, r := range []Request{
			{Kind: wire.TaskFinish, ID: "old", Text: "Done.", Timeout: time.Hour, TaskFinishEra: true},
			{Kind: wire.TaskFinish, ID: "current", Text: "Done too.", Timeout: time.Hour},
		} {
			go func() { _, _ = h.Ask(ctx, "tok", r) }()
		}
		synctest.Wait()
		want := map[string]bool{"old": true, "current": false}
		if got := namesOf(h, "tok"); len(got) != 2 || got["old"] != want["old"] || got["current"] != want["current"] {
			t.Errorf("pending list says %v, want %v", got, want)
		}

		h.Close() // the server stops; both stay pending in the store
		cancel()
		synctest.Wait()
		h2, _ := restart()
		if p, _, err := h2.Restore([]string{"tok"}); err != nil || p != 2 {
			t.Fatalf("restored %d pending: %v", p, err)
		}
		if got := namesOf(h2, "tok"); len(got) != 2 || got["old"] != want["old"] || got["current"] != want["current"] {
			t.Errorf("after a restart the pending list says %v, want %v", got, want)
		}
	})
}
