package hub

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestChoicesReachClientsAndSurviveRestart: the options offered with a
// question and a task report go to the devices with the requests, and
// are still there in the pending list after a restart.
func TestChoicesReachClientsAndSurviveRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		qs := []*pb.Question{{Question: "go on?", Options: []*pb.Option{{Label: "Continue", Description: "keep going"}, {Label: "Stop"}}, Multiple: true, Custom: true}}
		dir := t.TempDir()
		db, err := store.Open(dir, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		h := New(Options{Store: db})
		dev := newFake("pc")
		h.Join("tok", dev, nil, Resume{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{}, 2)
		for _, k := range []wire.Kind{wire.AskQuestion, wire.TaskFinish} {
			go func() {
				_, _ = h.Ask(ctx, "tok", Request{Kind: k, ID: "id-" + k.String(), Text: "go on?", Timeout: time.Hour, Questions: qs})
				done <- struct{}{}
			}()
		}
		synctest.Wait()
		shown := 0
		for _, n := range dev.notes() {
			if n.Kind == NoteAsked {
				shown++
				if !questionsEqual(n.Request.Questions, qs) {
					t.Errorf("%s shown with Questions = %v", n.Request.Kind, n.Request.Questions)
				}
			}
		}
		if shown != 2 {
			t.Errorf("%d requests shown, want 2", shown)
		}
		h.Close()
		cancel()
		<-done
		<-done
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		db, err = store.Open(dir, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		h2 := New(Options{Store: db})
		if p, _, err := h2.Restore([]string{"tok"}); err != nil || p != 2 {
			t.Fatalf("restored %d pending: %v", p, err)
		}
		ps := pendingOf(h2, "tok")
		if len(ps) != 2 {
			t.Fatalf("pending after restart = %v", ps)
		}
		for _, p := range ps {
			if !questionsEqual(p.Request.Questions, qs) {
				t.Errorf("%s after restart: Questions = %v", p.Request.Kind, p.Request.Questions)
			}
		}
		h2.Close()
	})
}

func questionsEqual(a, b []*pb.Question) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
