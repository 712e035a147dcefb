package channel

import (
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// TestTelegramCopyByTagEditedOnce: a reply to a message whose own note is
// not to be read (a cluster's, not written yet) finds its question by
// the tag its keyboard carries; the message, known already, is edited
// once when the question is settled, not once for each way it was
// known.
func TestTelegramCopyByTagEditedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		notes := newHidingNotes()
		api, tg, h, _ := pipeTelegram(t, notes)
		k := sentKey{42, telegramtest.FirstMessageID}
		notes.hide(tg.noteKey(k))
		q := askOn(t, h, "q-1")
		api.Call(t, "sendMessage", 1)
		synctest.Wait()
		api.Push(telegramtest.Reply(42, 500, k.msg, "Ship it."))
		if got := textOf(answer(t, q)); got != "Ship it." {
			t.Fatalf("the agent got %q", got)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		edits := 0
		_ = api.WaitFor(t.Context(), func(calls []telegramtest.Call) bool {
			for _, c := range calls {
				if c.Method == "editMessageText" && c.Form["message_id"] == strconv.Itoa(k.msg) {
					edits++
				}
			}
			return true
		})
		if edits != 1 {
			t.Errorf("the message was edited %d times, want once", edits)
		}
		for _, said := range api.Said("Not taken") {
			t.Errorf("the person was told %q", said)
		}
	})
}
