package e2e

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"strconv"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/telegramtest"
)

// TestSingleTelegramSlowPhotoAndTapAcrossKill9: a photo reply whose
// download is slow holds up no tap on another question (its agent has
// the answer and the person's spinner is answered meanwhile), and
// neither update is confirmed while the photo's is not handled. Killed
// -9 then, and started again, the server is handed both again: the
// photo answers its question (not lost), and the tap, handled already,
// is told answered again, its question answered once (not applied
// twice), no one told an answer was not taken.
func TestSingleTelegramSlowPhotoAndTapAcrossKill9(t *testing.T) {
	tg := telegramtest.Start(t, tgToken)
	port, data := freePort(t), t.TempDir()
	s := startSingle(t, port, data, telegramConfig(tg.URL))
	photoDone := askAsync(startMCP(t, s, tokenA), "Which layout?")
	photoMsg := must[int](t)(strconv.Atoi(tg.Call(t, "sendMessage", 1)["sent_message_id"]))
	tapDone := askAsync(startMCP(t, s, tokenA), "Tap beside the photo?")
	form := tg.Call(t, "sendMessage", 2)
	tapMsg := must[int](t)(strconv.Atoi(form["sent_message_id"]))
	label := must[telegramtest.Keyboard](t)(telegramtest.KeyboardOf(form)).InlineKeyboard[0][0].Text
	if !s.logw.waitCount("a question sent and noted", 2, 10*time.Second) {
		t.Fatal("the questions' messages were never noted")
	}

	pic := photoPNG(t, color.RGBA{G: 200, A: 255})
	tg.AddFile("ph-1", pic.Bytes())
	downloading, release := tg.Hold("getFile")
	defer release()
	tg.Push(map[string]any{"message": map[string]any{"message_id": 500, "date": 1700000000, "caption": "This one.",
		"photo":            []any{map[string]any{"file_id": "ph-1", "file_unique_id": "b", "width": 4, "height": 4, "file_size": pic.Len()}},
		"chat":             map[string]any{"id": chat, "type": "private"},
		"from":             map[string]any{"id": chat, "is_bot": false, "first_name": "Ana"},
		"reply_to_message": map[string]any{"message_id": photoMsg, "date": 1700000000, "chat": map[string]any{"id": chat, "type": "private"}}}})
	select {
	case <-downloading:
	case <-time.After(10 * time.Second):
		t.Fatal("the photo was never downloaded")
	}
	tg.Push(telegramtest.Callback(chat, tapMsg, "a:0"))
	select {
	case r := <-tapDone:
		if r.err != nil || r.r.IsError || resultText(r.r) != label {
			t.Fatalf("the tap's agent got %+v %v: %q, want %q", r.r, r.err, resultText(r.r), label)
		}
	case <-time.After(10 * time.Second): // the photo's download is held for longer: a photo's 30 s
		t.Fatal("the tap was not answered while the photo downloads")
	}
	if got := tg.Call(t, "answerCallbackQuery", 1)["text"]; got != "Answered: "+label {
		t.Errorf("the tap was answered %q", got)
	}
	if c := tg.Confirmed(); c != 0 {
		t.Fatalf("update %d confirmed while the photo's, before it, is handled", c)
	}

	s.kill9(t)
	release()
	startSingle(t, port, data, telegramConfig(tg.URL))
	wantAnswer(t, photoDone, "This one.")
	waitConfirmed(t, tg, 2)
	if err := tg.WaitFor(t.Context(), func(calls []telegramtest.Call) bool {
		n := 0
		for _, c := range calls {
			if c.Method == "answerCallbackQuery" {
				n++
				if c.Form["text"] != "Answered: "+label {
					t.Errorf("the tap handed again was answered %q", c.Form["text"])
				}
			}
		}
		return n >= 2
	}); err != nil {
		t.Fatal(err)
	}
	for _, said := range tg.Said("Not taken") {
		t.Errorf("the person was told %q", said)
	}
}

// photoPNG is a 4×4 PNG, one pixel of it c: a photo a person sends.
func photoPNG(t *testing.T, c color.Color) *bytes.Buffer {
	t.Helper()
	var pic bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 2, c)
	if err := png.Encode(&pic, img); err != nil {
		t.Fatal(err)
	}
	return &pic
}
