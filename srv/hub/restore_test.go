package hub

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// restartable is a hub over a store in a fresh directory. restart, once
// the test has closed that hub, closes the store and opens it again with
// a new hub over it, as a server restarting does: its requests are not
// restored yet. Every hub and store it opens closes when the test ends.
func restartable(t *testing.T) (h *Hub, restart func() (*Hub, *store.Store)) {
	t.Helper()
	dir := t.TempDir()
	var db *store.Store
	open := func() (*Hub, *store.Store) {
		t.Helper()
		d, err := store.Open(dir, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		h := New(Options{Store: d})
		t.Cleanup(func() { h.Close(); _ = d.Close() })
		db = d
		return h, d
	}
	h, _ = open()
	return h, func() (*Hub, *store.Store) {
		t.Helper()
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		return open()
	}
}

// restored restores h's requests of the token "tok".
func restored(t *testing.T, h *Hub) {
	t.Helper()
	if _, _, err := h.Restore([]string{"tok"}); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreAcrossRestart runs in a synctest bubble, the store's writer
// with it: synctest.Wait is "the requests are saved and shown", and "the
// agent has re-attached", without sleeping.
func TestRestoreAcrossRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, restart := restartable(t)
		ctx, cancel := context.WithCancel(context.Background())
		_, ec := ask(h, "tok", "survivor", time.Minute, ctx)
		_, ec2 := ask(h, "tok", "answered", time.Minute, context.Background())
		synctest.Wait()
		img := &pb.McpResultContent{Type: 2, Image: &pb.ImageContent{Data: "AAAA", MimeType: "image/png"}}
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "answered", Reply{ClientID: "pc", Nickname: "laptop", Contents: []*pb.McpResultContent{img}}); err != nil {
			t.Fatal(err)
		}
		<-ec2
		h.Close() // the server stops; "survivor" stays pending in the store
		cancel()
		<-ec
		h2, _ := restart()
		p, s, err := h2.Restore([]string{"tok", "unrelated-token"})
		if err != nil || p != 1 || s != 1 {
			t.Fatalf("restored %d pending, %d settled: %v", p, s, err)
		}
		h2.Join("tok", newFake("late"), nil, Resume{})
		if ps := pendingOf(h2, "tok"); len(ps) != 1 || ps[0].Request.ID != "survivor" {
			t.Fatalf("pending after restart = %v", ps)
		}
		rc, ec3 := ask(h2, "tok", "survivor", time.Minute, context.Background()) // the agent re-attaches
		synctest.Wait()
		if err := h2.Answer(context.Background(), "tok", wire.AskQuestion, "survivor", Reply{ClientID: "late"}); err != nil {
			t.Fatal(err)
		}
		if r := <-rc; r.ClientID != "late" || <-ec3 != nil {
			t.Fatalf("after restart: %+v", r)
		}
		r, err := h2.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "answered", Text: "q?", Timeout: time.Minute})
		if err != nil || r.Nickname != "laptop" || r.Contents[0].GetImage().GetData() != "AAAA" {
			t.Fatalf("answer kept across the restart: %+v %v", r, err)
		}
	})
}

// TestReattachAfterRestartMustMatch: after a restart, a request restored
// pending or answered re-attaches only the same request; another one
// reusing its ID is refused, not attached to it or handed its answer.
func TestReattachAfterRestartMustMatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, restart := restartable(t)
		asked := func(h *Hub, id, dir, text string, ctx context.Context) chan error {
			ec := make(chan error, 1)
			go func() {
				_, err := h.Ask(ctx, "tok", Request{Kind: wire.AskQuestion, ID: id, ProjectDirectory: dir, Text: text, Timeout: time.Minute})
				ec <- err
			}()
			return ec
		}
		ctx, cancel := context.WithCancel(context.Background())
		ec := asked(h, "waiting", "/p", "Merge it?", ctx)
		ec2 := asked(h, "done", "/p", "Ship it?", context.Background())
		synctest.Wait()
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "done", Reply{ClientID: "pc", Nickname: "laptop"}); err != nil {
			t.Fatal(err)
		}
		<-ec2
		h.Close()
		cancel()
		<-ec
		h2, _ := restart()
		restored(t, h2)
		for _, c := range []struct{ id, dir, text string }{
			{"waiting", "/p", "Drop the table?"},
			{"waiting", "/other", "Merge it?"},
			{"done", "/p", "Drop the table?"},
			{"done", "", "Ship it?"},
		} {
			select {
			case err := <-asked(h2, c.id, c.dir, c.text, context.Background()):
				if !errors.Is(err, ErrDuplicate) {
					t.Errorf("%s asked as %q in %q: %v, want ErrDuplicate", c.id, c.text, c.dir, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s asked as %q in %q: attached to the pending request", c.id, c.text, c.dir)
			}
		}
		r, err := h2.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "done", ProjectDirectory: "/p", Text: "Ship it?", Timeout: time.Minute})
		if err != nil || r.Nickname != "laptop" {
			t.Fatalf("the same request after the restart: %+v %v", r, err)
		}
		ec3 := asked(h2, "waiting", "/p", "Merge it?", context.Background())
		synctest.Wait()
		if err := h2.Answer(context.Background(), "tok", wire.AskQuestion, "waiting", Reply{ClientID: "late"}); err != nil || <-ec3 != nil {
			t.Fatalf("the same pending request after the restart: %v", err)
		}
	})
}

// TestAgentNamesKept: the agent's, model's and MCP client's names travel
// with a request through the store, a restart and the history.
func TestAgentNamesKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, restart := restartable(t)
		req := Request{Kind: wire.TaskFinish, ID: "named", Text: "Done.", Timeout: time.Minute,
			AgentName: "Claude Code", ReasoningModelName: "claude-opus-4", McpClientName: "claude-code"}
		ctx, cancel := context.WithCancel(context.Background())
		ec := make(chan error, 1)
		go func() { _, err := h.Ask(ctx, "tok", req); ec <- err }()
		synctest.Wait()
		h.Close()
		cancel()
		<-ec
		h2, _ := restart()
		restored(t, h2)
		named := func(what string, r Request) {
			t.Helper()
			if r.AgentName != req.AgentName || r.ReasoningModelName != req.ReasoningModelName || r.McpClientName != req.McpClientName {
				t.Errorf("%s: %v", what, r)
			}
		}
		ps := pendingOf(h2, "tok")
		if len(ps) != 1 {
			t.Fatalf("pending after restart = %v, want the task report once", ps)
		}
		for _, p := range ps {
			named("pending", p.Request)
		}
		if err := h2.Answer(context.Background(), "tok", wire.TaskFinish, "named", Reply{ClientID: "pc"}); err != nil {
			t.Fatal(err)
		}
		items, _, err := h2.History("tok", time.Now().Add(time.Minute), 10)
		if err != nil || len(items) != 1 {
			t.Fatalf("history = %v, %v", items, err)
		}
		named("history", items[0].Request)
	})
}

// A request whose caller takes no missed answers (WithdrawOnLeave: the
// older agentassistant's MCP) and was pending when the server stopped is
// withdrawn at the next start, as when its call drops: that caller's call
// ended with the server and never comes back for an answer. One whose
// caller does re-attach stays pending.
func TestRestoreWithdrawsWhatNoCallerComesBackFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, restart := restartable(t)
		ctx, cancel := context.WithCancel(context.Background())
		ec := make(chan error, 1)
		go func() {
			_, err := h.Ask(ctx, "tok", Request{Kind: wire.AskQuestion, ID: "older", Text: "q?", Timeout: time.Hour, WithdrawOnLeave: true})
			ec <- err
		}()
		_, ec2 := ask(h, "tok", "ours", time.Hour, ctx)
		synctest.Wait()
		h.Close()
		cancel()
		<-ec
		<-ec2
		h2, db := restart()
		if p, _, err := h2.Restore([]string{"tok"}); err != nil || p != 1 {
			t.Fatalf("restored %d pending: %v", p, err)
		}
		c := newFake("late")
		h2.Join("tok", c, nil, Resume{})
		if ps := pendingOf(h2, "tok"); len(ps) != 1 || ps[0].Request.ID != "ours" {
			t.Fatalf("pending after restart = %v, want only ours", ps)
		}
		_, err := h2.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "older", Text: "q?", Timeout: time.Hour, WithdrawOnLeave: true})
		if !errors.Is(err, ErrWithdrawn) {
			t.Fatalf("the older caller's request after the restart: %v, want it withdrawn", err)
		}
		recs, _, err := db.History(store.Room("tok"), time.Now().Add(time.Hour), 10)
		if err != nil || len(recs) != 1 || recs[0].ID != "older" || recs[0].Status != store.Cancelled || recs[0].ClosedNote != "abandoned" {
			t.Fatalf("history %+v %v, want older withdrawn as abandoned", recs, err)
		}
	})
}

// TestHistoryPrunedWhileRunning: the history past HistoryRetention
// ([requests] history) was deleted only at start (Restore), so a server
// that ran for weeks kept every request it ever settled, its answers'
// images too, on disk and in its history view. A running server now
// deletes it as it goes.
func TestHistoryPrunedWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db, err := store.Open(t.TempDir(), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		h := New(Options{Store: db, HistoryRetention: 48 * time.Hour})
		defer h.Close()
		restored(t, h)
		answered := func(id string) {
			t.Helper()
			_, ec := ask(h, "tok", id, time.Minute, context.Background())
			synctest.Wait()
			if err := h.Answer(context.Background(), "tok", wire.AskQuestion, id, Reply{ClientID: "pc", Nickname: "laptop"}); err != nil {
				t.Fatal(err)
			}
			if err := <-ec; err != nil {
				t.Fatal(err)
			}
		}
		answered("old")
		time.Sleep(50 * time.Hour)
		answered("new")
		past, _, err := h.History("tok", time.Now().Add(time.Second), 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, p := range past {
			ids = append(ids, p.Request.ID)
		}
		if len(ids) != 1 || ids[0] != "new" {
			t.Errorf("history after 50 h of a 48 h history: %v, want [new]", ids)
		}
	})
}
