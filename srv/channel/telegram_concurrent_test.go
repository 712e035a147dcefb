package channel

import (
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// photoReply is the update of a photo (the file fileID) with caption in
// chat, by Ana, replying to the message to.
func photoReply(chat int64, id, to int, caption, fileID string, size int) map[string]any {
	u := telegramtest.Reply(chat, id, to, "")
	m := u["message"].(map[string]any)
	delete(m, "text")
	m["caption"] = caption
	m["photo"] = []any{map[string]any{"file_id": fileID, "file_unique_id": "u-" + fileID, "width": 8, "height": 8, "file_size": size}}
	return u
}

// sentTo is the ID of the message the n-th sendMessage made in chat,
// once it came.
func sentTo(t *testing.T, api *telegramtest.API, n int, chat int64) int {
	t.Helper()
	for i := 1; ; i++ {
		form := api.Call(t, "sendMessage", i)
		if form["chat_id"] != strconv.FormatInt(chat, 10) {
			continue
		}
		if n--; n == 0 {
			id, _ := strconv.Atoi(form["sent_message_id"])
			return id
		}
	}
}

// slowPhotoThenTap asks q-1 (its own words) and q-2 (options) in chats
// and sends a photo reply to q-1's message in the first chat, its
// download held (getFile waits): release lets it go. tapAt is where
// q-2's message is in chat.
func slowPhotoThenTap(t *testing.T, chats ...int64) (api *telegramtest.API, tg *Telegram, free, chosen chan *hub.Reply, tapAt func(chat int64) int, release func()) {
	t.Helper()
	const botToken = "123456:ABC-secret-bot-token"
	api = telegramtest.Start(t, botToken)
	pic := testPNG(t)
	api.AddFile("ph-1", pic)
	tg = &Telegram{BotToken: botToken, Chats: chats, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	free = f.ask(tokA, "q-1")
	photoTo := sentTo(t, api, 1, chats[0])
	for i := range chats {
		sentTo(t, api, 1, chats[i])
	}
	chosen = f.askChoices(tokA, "q-2")
	tapAt = func(chat int64) int { return sentTo(t, api, 2, chat) }
	for _, chat := range chats {
		at := sentKey{chat, tapAt(chat)}
		eventually(t, "noted what the message asks", func() bool { return tg.tracks(at) && tg.tracks(sentKey{chats[0], photoTo}) })
	}
	arrived, release := api.Hold("getFile")
	t.Cleanup(release)
	api.Push(photoReply(chats[0], 500, photoTo, "This one.", "ph-1", len(pic)))
	within(t, "the photo's download", arrived)
	return api, tg, free, chosen, tapAt, release
}

// TestTelegramTapNotHeldBehindASlowPhoto: a photo reply whose download
// is slow holds up no tap on another question, in another chat or in
// the same: the tap answers, and its spinner is answered
// (answerCallbackQuery), while the photo still downloads. Neither
// update is confirmed before the photo's is handled: the offset passes
// only what is handled, in order.
func TestTelegramTapNotHeldBehindASlowPhoto(t *testing.T) {
	for _, c := range []struct {
		name  string
		chats []int64
		tap   int64
	}{
		{"another chat", []int64{42, 43}, 43},
		{"the same chat", []int64{42}, 42},
	} {
		t.Run(c.name, func(t *testing.T) {
			api, _, free, chosen, tapAt, release := slowPhotoThenTap(t, c.chats...)
			api.Push(telegramtest.Callback(c.tap, tapAt(c.tap), "a:3"))
			if rep := answer(t, chosen); rep == nil || rep.Contents[0].GetText().GetText() != "Ship it" {
				t.Fatalf("the tap answered %+v", rep)
			}
			if got := api.Call(t, "answerCallbackQuery", 1)["text"]; got != "Answered: Ship it" {
				t.Errorf("the tap was answered %q", got)
			}
			if n := api.Confirmed(); n != 0 {
				t.Errorf("update %d confirmed while the photo before it downloads", n)
			}
			release()
			rep := answer(t, free)
			if rep == nil || len(rep.Contents) != 2 || rep.Contents[0].GetText().GetText() != "This one." {
				t.Fatalf("the photo answered %+v", rep)
			}
			if err := api.ConfirmedBy(t.Context(), 2); err != nil {
				t.Fatal(err)
			}
			if n := len(api.Said("Not taken")); n != 0 {
				t.Errorf("the person was told %d times an answer was not taken", n)
			}
		})
	}
}

// TestTelegramOneMessageInOrder: the updates of one message are handled
// in the order Telegram hands them, a slow one too: a photo reply to a
// question's message, then a tap on it; the reply came first, so it
// answers, and the tap is told its button no longer answers.
func TestTelegramOneMessageInOrder(t *testing.T) {
	api, _, free, _, _, release := slowPhotoThenTap(t, 42)
	msg, _ := strconv.Atoi(api.Call(t, "sendMessage", 1)["sent_message_id"])
	api.Push(telegramtest.Callback(42, msg, "a:0"))
	if err := api.Handed(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	release()
	if rep := answer(t, free); rep == nil || rep.Contents[0].GetText().GetText() != "This one." {
		t.Fatalf("the question was answered %+v, want the photo that came first", rep)
	}
	if got := api.Call(t, "answerCallbackQuery", 1)["text"]; got != answercap.ErrVoid.Error() {
		t.Errorf("the tap was answered %q", got)
	}
	if err := api.ConfirmedBy(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
}

// TestTelegramTapAnsweredWithinASecondOfAPhoto: in fake time, a tap
// pushed while a photo reply to another question downloads is answered
// within asideMaxRetry: the poll, which getUpdates answers at once while
// an update is unconfirmed, reads again at least that often, and no more
// often than that (and once a handling ends) while the photo waits.
func TestTelegramTapAnsweredWithinASecondOfAPhoto(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, tg, h, _ := pipeTelegram(t, nil)
		free := askOn(t, h, "q-1")
		photoTo, _ := strconv.Atoi(api.Call(t, "sendMessage", 1)["sent_message_id"])
		chosen := askOn(t, h, "q-2")
		tapAt, _ := strconv.Atoi(api.Call(t, "sendMessage", 2)["sent_message_id"])
		synctest.Wait()
		if !tg.tracks(sentKey{42, photoTo}) || !tg.tracks(sentKey{42, tapAt}) {
			t.Fatal("the messages were not noted")
		}
		pic := testPNG(t)
		api.AddFile("ph-1", pic)
		_, release := api.Hold("getFile")
		defer release()
		api.Push(photoReply(42, 500, photoTo, "This one.", "ph-1", len(pic)))
		synctest.Wait() // its download waits

		start, polls := time.Now(), api.Polls()
		api.Push(telegramtest.Callback(42, tapAt, "a:0"))
		if got := textOf(answer(t, chosen)); got != "Yes" {
			t.Fatalf("the tap answered %q", got)
		}
		took := time.Since(start)
		t.Logf("the tap answered %v after it came", took)
		if took > asideMaxRetry {
			t.Errorf("the tap was answered after %v, more than %v, the photo still downloading", took, asideMaxRetry)
		}
		if got := api.Call(t, "answerCallbackQuery", 1)["text"]; got != "Answered: Yes" {
			t.Errorf("the tap was answered %q", got)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		n := api.Polls() - polls
		t.Logf("%d polls in the %v since the tap came", n, time.Since(start))
		if n > int(time.Since(start)/asideMaxRetry)+2 { // one a second, and one as the tap's handling ended
			t.Errorf("%d polls while the photo downloads", n)
		}
		if n := api.Confirmed(); n != 0 {
			t.Errorf("update %d confirmed while the photo before it downloads", n)
		}
		release()
		if rep := answer(t, free); rep == nil || len(rep.Contents) != 2 || textOf(rep) != "This one." {
			t.Fatalf("the photo answered %+v", rep)
		}
		if err := api.ConfirmedBy(t.Context(), 2); err != nil {
			t.Fatal(err)
		}
	})
}
