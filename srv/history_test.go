package srv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestHistoryPagedAndCleared: settled requests come back newest first, a
// page at a time, only for their own token, and can be cleared.
func TestHistoryPagedAndCleared(t *testing.T) {
	db, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, base := newGuarded(t, srv.Options{Hub: hub.Options{Store: db}})
	h := s.Hub()
	ui := login(t, base, tokA, "pc")
	for i := range 7 {
		id := fmt.Sprint("h", i)
		go func() {
			_, _ = h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: id, Text: "question " + id, Timeout: time.Minute})
		}()
		expect(t, ui, "AskQuestion")
		if i == 6 {
			break // stays pending: not history
		}
		if err := ui.Send(wstest.TextReply(id, "answer "+id)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, id+" settled", func() bool { return !h.Validity(tokA, []string{id})[id] })
		time.Sleep(2 * time.Millisecond) // distinct creation times
	}
	page := func(before int64) *pb.GetHistoryResponse {
		if err := ui.Send(&pb.WebsocketMessage{Cmd: "GetHistory", GetHistoryRequest: &pb.GetHistoryRequest{Before: before, Limit: 4}}); err != nil {
			t.Fatal(err)
		}
		for {
			m := expect(t, ui, "GetHistory")
			return m.GetGetHistoryResponse()
		}
	}
	p1 := page(0)
	if len(p1.GetItems()) != 4 || !p1.GetMore() || p1.GetItems()[0].GetAskQuestionRequest().GetID() != "h5" {
		t.Fatalf("first page: %v", p1)
	}
	it := p1.GetItems()[0]
	if it.GetStatus() != "answered" || it.GetResponse().GetContents()[0].GetText().GetText() != "answer h5" || it.GetAnsweredBy() != "pc" ||
		ui.ID == "" || it.GetAnsweredById() != ui.ID {
		t.Errorf("item = %v (answered by %q)", it, ui.ID)
	}
	p2 := page(p1.GetItems()[3].GetCreatedAt())
	if len(p2.GetItems()) != 2 || p2.GetMore() || p2.GetItems()[1].GetAskQuestionRequest().GetID() != "h0" {
		t.Fatalf("second page: %v", p2)
	}
	other := login(t, base, tokB, "stranger")
	if err := other.Send(&pb.WebsocketMessage{Cmd: "GetHistory"}); err != nil {
		t.Fatal(err)
	}
	if n := len(expect(t, other, "GetHistory").GetGetHistoryResponse().GetItems()); n != 0 {
		t.Errorf("another token sees %d items", n)
	}
	if err := ui.Send(&pb.WebsocketMessage{Cmd: "ClearHistory"}); err != nil {
		t.Fatal(err)
	}
	if m := expect(t, ui, "ClearHistory"); m.GetStrParam() != "6" {
		t.Errorf("cleared %s", m.GetStrParam())
	}
	if p := page(0); len(p.GetItems()) != 0 {
		t.Errorf("after clearing: %v", p)
	}
	if ps, _ := h.PendingMessages(tokA); len(ps) != 1 {
		t.Errorf("clearing history touched the pending request: %v", ps)
	}
}

// TestHistorySaysWhyUnanswered: a request that closed without an answer
// comes back in the history with the reason its live notice gave, so a
// device that was away labels it as truly (the agent withdrew it, or went
// away).
func TestHistorySaysWhyUnanswered(t *testing.T) {
	db, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, base := newGuarded(t, srv.Options{Hub: hub.Options{Store: db}})
	h := s.Hub()
	ui := login(t, base, tokA, "pc")
	go func() {
		_, _ = h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "w1", Text: "withdrawn?", Timeout: time.Minute})
	}()
	expect(t, ui, "AskQuestion")
	if err := h.Cancel(context.Background(), tokA, "w1"); err != nil {
		t.Fatal(err)
	}
	expect(t, ui, "RequestCancelled")
	ctx, leave := context.WithCancel(context.Background())
	left := make(chan struct{})
	go func() {
		defer close(left)
		_, _ = h.Ask(ctx, tokA, hub.Request{Kind: wire.AskQuestion, ID: "w2", Text: "left?", Timeout: time.Minute, WithdrawOnLeave: true})
	}()
	expect(t, ui, "AskQuestion")
	leave()
	<-left
	if m := expect(t, ui, "RequestCancelled"); m.GetRequestCancelledNotification().GetReason() != "abandoned" {
		t.Fatalf("the live notice: %v", m)
	}
	if err := ui.Send(&pb.WebsocketMessage{Cmd: "GetHistory"}); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, it := range expectHistory(t, ui) {
		reasons[it.GetAskQuestionRequest().GetID()] = it.GetStatus() + "/" + it.GetReason()
	}
	if reasons["w1"] != "cancelled/cancelled" || reasons["w2"] != "cancelled/abandoned" {
		t.Errorf("history's reasons: %v", reasons)
	}
}

// expectHistory is the next GetHistory reply's items.
func expectHistory(t *testing.T, ui *wstest.Client) []*pb.HistoryItem {
	t.Helper()
	return expect(t, ui, "GetHistory").GetGetHistoryResponse().GetItems()
}
