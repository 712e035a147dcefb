package channel

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/telegramtest"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// testPNG is a small real image.
func testPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestTelegramPhotos: a question's data: images go as photos replying to
// its message; a reply with a photo and a caption answers with both, the
// photo read through the Bot API's getFile and file link.
func TestTelegramPhotos(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	pic := testPNG(t)
	api.AddFile("ph-1", pic)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	answered := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := f.hub.Ask(t.Context(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", ProjectDirectory: "/srv/shop", AgentName: "Claude Code",
			Text: "Which one?\n\n![the old layout](data:image/png;base64," + base64.StdEncoding.EncodeToString(pic) + ")", Timeout: time.Hour})
		answered <- rep
	}()
	sent := api.Call(t, "sendMessage", 1)
	if !strings.Contains(sent["text"], "Which one?\n\n[the old layout]") || strings.Contains(sent["text"], "base64") {
		t.Errorf("the question's text: %q", sent["text"])
	}
	ph := api.Call(t, "sendPhoto", 1)
	if ph["chat_id"] != "42" || ph["photo"] != "image-1.png:"+strconv.Itoa(len(pic)) || ph["caption"] != "the old layout" ||
		!strings.Contains(ph["reply_parameters"], `"message_id":`+sent["sent_message_id"]) {
		t.Errorf("the photo: %v", ph)
	}

	msgID, _ := strconv.Atoi(sent["sent_message_id"])
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, msgID}) })
	api.Push(map[string]any{"message": map[string]any{"message_id": 500, "date": 1700000000, "caption": "This one.",
		"photo": []any{
			map[string]any{"file_id": "ph-small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 900},
			map[string]any{"file_id": "ph-1", "file_unique_id": "b", "width": 800, "height": 800, "file_size": len(pic)},
		},
		"chat": map[string]any{"id": 42, "type": "private"}, "from": map[string]any{"id": 42, "is_bot": false, "first_name": "Ana"},
		"reply_to_message": map[string]any{"message_id": msgID, "date": 1700000000, "chat": map[string]any{"id": 42, "type": "private"}}}})
	rep := answer(t, answered)
	if rep == nil || len(rep.Contents) != 2 || rep.Contents[0].GetText().GetText() != "This one." {
		t.Fatalf("the agent got %+v", rep)
	}
	img := rep.Contents[1].GetImage()
	if got, _ := base64.StdEncoding.DecodeString(img.GetData()); !bytes.Equal(got, pic) || img.GetMimeType() != "image/png" {
		t.Errorf("the answer's image: %s, %d bytes", img.GetMimeType(), len(got))
	}
	if gf := api.Call(t, "getFile", 1); gf["file_id"] != "ph-1" {
		t.Errorf("getFile took %v, want the largest size", gf)
	}
}

// TestTelegramPhotoFitsAModel: of a photo's sizes, the one taken is the
// largest a model's API reads (5 MB of base64, 3.75 MB of data), not one
// the agent's model would refuse at its next turn.
func TestTelegramPhotoFitsAModel(t *testing.T) {
	const botToken = "123456:ABC-secret-bot-token"
	api := telegramtest.Start(t, botToken)
	pic := testPNG(t)
	api.AddFile("ph-fits", pic)
	api.AddFile("ph-big", pic)
	tg := &Telegram{BotToken: botToken, Chats: []int64{42}, ServerURL: api.URL}
	f := newFixture(t, map[string][]Channel{tokA: {tg}}, Options{})
	answered := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := f.hub.Ask(t.Context(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Which one?", Timeout: time.Hour})
		answered <- rep
	}()
	sent := api.Call(t, "sendMessage", 1)
	msgID, _ := strconv.Atoi(sent["sent_message_id"])
	eventually(t, "noted what the message asks", func() bool { return tg.tracks(sentKey{42, msgID}) })
	api.Push(map[string]any{"message": map[string]any{"message_id": 500, "date": 1700000000,
		"photo": []any{
			map[string]any{"file_id": "ph-fits", "file_unique_id": "m", "width": 1280, "height": 960, "file_size": 900_000},
			map[string]any{"file_id": "ph-big", "file_unique_id": "w", "width": 2560, "height": 1920, "file_size": 4_500_000},
		},
		"chat": map[string]any{"id": 42, "type": "private"}, "from": map[string]any{"id": 42, "is_bot": false, "first_name": "Ana"},
		"reply_to_message": map[string]any{"message_id": msgID, "date": 1700000000, "chat": map[string]any{"id": 42, "type": "private"}}}})
	if rep := answer(t, answered); rep == nil || len(rep.Contents) != 1 || rep.Contents[0].GetImage() == nil {
		t.Fatalf("the agent got %+v", rep)
	}
	if gf := api.Call(t, "getFile", 1); gf["file_id"] != "ph-fits" {
		t.Errorf("getFile took %v, want the largest size within 3.75 MB", gf)
	}
}
