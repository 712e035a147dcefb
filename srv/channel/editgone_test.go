package channel

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/pipenet"
	"github.com/agentassistant/agentassistant/internal/slacktest"
	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestTelegramEditOfADeletedMessage: a person deletes one of a
// question's messages (a copy sent again after a restart, or the one in
// one of two chats). Once the question is settled, that message has
// nothing to edit: the others are edited all the same, and the edit is
// not owed, tried again for two days.
func TestTelegramEditOfADeletedMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		notes, err := OpenFileNotes(t.TempDir(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = notes.Close() })
		ln := pipenet.New()
		api := telegramtest.NewOn(pipeBotToken, ln)
		t.Cleanup(api.Close)
		tr := &http.Transport{DialContext: ln.Dial}
		t.Cleanup(tr.CloseIdleConnections)
		tg := &Telegram{BotToken: pipeBotToken, Chats: []int64{42, 43}, ServerURL: api.URL, transport: tr}
		h := hub.New(hub.Options{})
		t.Cleanup(h.Close)
		m := New(Options{Hub: h, Routes: map[string][]Channel{tokA: {tg}}, Notes: notes})
		t.Cleanup(m.Close)

		q := askOn(t, h, "q-1")
		deleted := api.Call(t, "sendMessage", 1)["sent_message_id"]
		kept := api.Call(t, "sendMessage", 2)["sent_message_id"]
		synctest.Wait()
		id, err := strconv.Atoi(deleted)
		if err != nil {
			t.Fatal(err)
		}
		api.Delete(id)
		err = h.Answer(t.Context(), tokA, wire.AskQuestion, "q-1", hub.Reply{Contents: []*pb.McpResultContent{textContent("Yes")}, ClientID: "ws:ana", Nickname: "Ana"})
		if err != nil {
			t.Fatal(err)
		}
		answer(t, q)
		time.Sleep(2 * time.Hour)
		synctest.Wait()

		tries, edited := 0, 0
		_ = api.WaitFor(context.Background(), func(calls []telegramtest.Call) bool {
			for _, c := range calls {
				switch {
				case c.Method != "editMessageText":
				case c.Form["message_id"] == deleted:
					tries++
				case c.Form["message_id"] == kept && c.Form["_error"] == "":
					edited++
				}
			}
			return true
		})
		if edited != 1 {
			t.Errorf("the message not deleted was edited %d times, want once", edited)
		}
		if tries != 1 {
			t.Errorf("the deleted message's edit was tried %d times, want once", tries)
		}
	})
}

// TestSlackUpdateOfADeletedMessage: the person deletes the first of a
// question's Slack messages, then answers with a button of a copy the
// server never learnt the timestamp of (posted again after a restart).
// The copy is updated once the question is settled all the same, and
// the update of the deleted one is not owed, tried again for two days.
func TestSlackUpdateOfADeletedMessage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		notes, err := OpenFileNotes(t.TempDir(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = notes.Close() })
		api, _, h, m := pipeSlack(t, notes)
		answered := make(chan *hub.Reply, 1)
		go func() {
			rep, _ := h.Ask(t.Context(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?", Timeout: time.Hour,
				Questions: []*pb.Question{{Options: []*pb.Option{{Label: "Deploy"}, {Label: "Wait"}}}}})
			answered <- rep
		}()
		deleted := api.Call(t, "chat.postMessage", 1)["_ts"]
		synctest.Wait()
		api.Delete(deleted)
		const copyTS = "1699999999.000001"
		api.Envelope(t, "interactive", slacktest.Press("U42", "D42", copyTS, "a:0:"+m.seqOf(store.Room(tokA), "q-1")))
		if rep := answer(t, answered); rep == nil || textOf(rep) != "Deploy" {
			t.Fatalf("the agent got %+v", rep)
		}
		time.Sleep(2 * time.Hour)
		synctest.Wait()

		tries, updated := 0, 0
		_ = api.WaitFor(context.Background(), func(calls []slacktest.Call) bool {
			for _, c := range calls {
				switch {
				case c.Method != "chat.update":
				case c.Form["ts"] == deleted:
					tries++
				case c.Form["ts"] == copyTS && c.Form["_error"] == "":
					updated++
				}
			}
			return true
		})
		if updated != 1 {
			t.Errorf("the copy was updated %d times, want once", updated)
		}
		if tries != 1 {
			t.Errorf("the deleted message's update was tried %d times, want once", tries)
		}
	})
}
