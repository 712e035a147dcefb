package hub

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// namesOf maps the pending list's task reports to their message_type.
func namesOf(h *Hub, token string) map[string]string {
	out := map[string]string{}
	for _, p := range pendingOf(h, token) {
		if r := p.GetTaskFinishRequest(); r != nil {
			out[r.GetID()] = p.GetMessageType()
		}
	}
	return out
}

// TestPendingReportNamedAsAsked: the pending list names a task report as
// the generation that asked it does, so that generation's apps, which
// convert only their own name, list it: "TaskFinish" for one asked
// through the older RPC, "WorkReport" for the rest. The name survives a
// restart with the request.
func TestPendingReportNamedAsAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		db, err := store.Open(dir, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		h := New(Options{Store: db})
		ctx, cancel := context.WithCancel(context.Background())
		for _, r := range []Request{
			{Kind: wire.TaskFinish, ID: "old", Text: "Done.", Timeout: time.Hour, TaskFinishEra: true},
			{Kind: wire.TaskFinish, ID: "current", Text: "Done too.", Timeout: time.Hour},
		} {
			go func() { _, _ = h.Ask(ctx, "tok", r) }()
		}
		synctest.Wait()
		want := map[string]string{"old": wire.CmdTaskFinish, "current": wire.CmdWorkReport}
		if got := namesOf(h, "tok"); len(got) != 2 || got["old"] != want["old"] || got["current"] != want["current"] {
			t.Errorf("pending list names %v, want %v", got, want)
		}

		h.Close() // the server stops; both stay pending in the store
		cancel()
		synctest.Wait()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db, err = store.Open(dir, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		h2 := New(Options{Store: db})
		defer h2.Close()
		if p, _, err := h2.Restore([]string{"tok"}); err != nil || p != 2 {
			t.Fatalf("restored %d pending: %v", p, err)
		}
		if got := namesOf(h2, "tok"); len(got) != 2 || got["old"] != want["old"] || got["current"] != want["current"] {
			t.Errorf("after a restart the pending list names %v, want %v", got, want)
		}
	})
}
