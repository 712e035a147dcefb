package channel

import (
	"bytes"
	"image/color"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentassistant/agentassistant/internal/slacktest"
)

// TestSlackReplyCarriesItsImages: a thread reply with files reaches the
// agent with its images after its text, each downloaded with the bot
// token and typed by its bytes; a PDF is left out with a word to the
// agent, and a file whose url_private names another host is not fetched
// (the bot token goes nowhere but Slack). A question that takes only its
// options answers with the option named, its image left out.
func TestSlackReplyCarriesItsImages(t *testing.T) {
	const botToken, appToken = "xoxb-15-secret-bot-token", "xapp-15-A1-secret-app-token"
	api := slacktest.Start(t, botToken, appToken)
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		_, _ = w.Write(pngOf(t, color.White))
	}))
	t.Cleanup(other.Close)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
	const dm = "D42"

	free := f.askText(tokA, "q-1", "What breaks?", nil)
	ts := api.Call(t, "chat.postMessage", 1)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts}); return ok })
	shot := pngOf(t, color.RGBA{G: 200, A: 255})
	astray := api.AddFile("F4", "x.png", "image/png", shot)
	astray["url_private"] = other.URL + "/files-pri/T1-F4/x.png"
	api.Envelope(t, "events_api", slacktest.FileReply("U42", dm, ts, "See these",
		api.AddFile("F1", "shot.png", "image/png", shot),
		api.AddFile("F2", "IMG_2.HEIC", "image/jpeg", heic),
		api.AddFile("F3", "report.pdf", "application/pdf", []byte("%PDF-1.4\n")),
		astray))
	rep := answer(t, free)
	if rep == nil || rep.Contents[0].GetText().GetText() != "See these" {
		t.Fatalf("the agent got %v", rep)
	}
	types, data := imagesOf(t, rep.Contents)
	if strings.Join(types, " ") != "image/png image/heic" || !bytes.Equal(data[0], shot) || !bytes.Equal(data[1], heic) {
		t.Errorf("the agent got the images %v, want the screenshot (image/png) and the photo (image/heic)", types)
	}
	if last := rep.Contents[len(rep.Contents)-1].GetText().GetText(); !strings.Contains(last, "2 files not taken as an image") {
		t.Errorf("the agent was not told of the files left out: %q", last)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("a file on another host was requested %d times", n)
	}
	if n := api.Fetched(); n != 2 {
		t.Errorf("%d files downloaded with the bot token, want the two images", n)
	}

	chosen := f.askChoices(tokA, "q-2")
	ts2 := api.Call(t, "chat.postMessage", 2)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts2}); return ok })
	api.Envelope(t, "events_api", slacktest.FileReply("U42", dm, ts2, "Ship it", api.AddFile("F5", "s.png", "image/png", shot)))
	if rep := answer(t, chosen); rep == nil || len(rep.Contents) != 1 || rep.Contents[0].GetText().GetText() != "Ship it" {
		t.Errorf("the agent got %v, want the option alone", rep)
	}
}

// TestSlackReplyFileOnlyFromFiles: a file whose url_private names the
// API's own host at another path (a Web API method, which Slack serves
// to a GET too, or a path climbing out of /files-pri/) is not fetched
// with the bot token: the bot posts nothing on the sender's say-so, and
// the agent is told of the files left out.
func TestSlackReplyFileOnlyFromFiles(t *testing.T) {
	const botToken, appToken = "xoxb-16-secret-bot-token", "xapp-16-A1-secret-app-token"
	api := slacktest.Start(t, botToken, appToken)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
	const dm = "D42"

	free := f.askText(tokA, "q-1", "What breaks?", nil)
	ts := api.Call(t, "chat.postMessage", 1)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{dm, ts}); return ok })
	method := api.AddFile("F1", "a.png", "image/png", pngOf(t, color.White))
	method["url_private"] = api.URL + "/api/chat.postMessage?channel=" + dm + "&text=pwned-by-method"
	climb := api.AddFile("F2", "b.png", "image/png", pngOf(t, color.White))
	climb["url_private"] = api.URL + "/files-pri/../api/chat.postMessage?channel=" + dm + "&text=pwned-by-climb"
	api.Envelope(t, "events_api", slacktest.FileReply("U42", dm, ts, "See these", method, climb))
	rep := answer(t, free)
	if rep == nil || rep.Contents[0].GetText().GetText() != "See these" {
		t.Fatalf("the agent got %v", rep)
	}
	if last := rep.Contents[len(rep.Contents)-1].GetText().GetText(); !strings.Contains(last, "2 files not taken as an image") {
		t.Errorf("the agent was not told of the files left out: %q", last)
	}
	_ = api.WaitFor(t.Context(), func(calls []slacktest.Call) bool {
		for _, c := range calls {
			if strings.HasPrefix(c.Form["text"], "pwned") {
				t.Errorf("a file's address called %s with the bot token: %v", c.Method, c.Form)
			}
		}
		return true
	})
}

// TestSlackReplyOfNoImageTold: a thread reply with no text whose file
// is none an answer takes (an "image/png" whose bytes are HTML) is told
// why, the file named.
func TestSlackReplyOfNoImageTold(t *testing.T) {
	const botToken, appToken = "xoxb-16-secret-bot-token", "xapp-16-A1-secret-app-token"
	api := slacktest.Start(t, botToken, appToken)
	sl := &Slack{BotToken: botToken, AppToken: appToken, Channel: "U42", Users: []string{"U42"}, APIURL: api.APIURL()}
	f := newFixture(t, map[string][]Channel{tokA: {sl}}, Options{})
	f.askText(tokA, "q-1", "What breaks?", nil)
	ts := api.Call(t, "chat.postMessage", 1)["_ts"]
	eventually(t, "noted what the message asks", func() bool { _, ok, _ := sl.question(t.Context(), slackKey{"D42", ts}); return ok })
	api.Envelope(t, "events_api", slacktest.FileReply("U42", "D42", ts, "", api.AddFile("F1", "x.png", "image/png", []byte("<html><script>alert(1)</script></html>"))))
	if told := api.Call(t, "chat.postMessage", 2); !strings.Contains(told["text"], "Not taken: an answer is text or an image (1 file not taken as an image") {
		t.Errorf("the person was told %v", told)
	}
}
