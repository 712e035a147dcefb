package hub

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestChoicesReachClientsAndSurviveRestart: the options offered with a
// question and a task report go to the devices with the requests, and
// are still there in the pending list after a restart.
func TestChoicesReachClientsAndSurviveRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		qs := []*pb.Question{{Question: "go on?", Options: []*pb.Option{{Label: "Continue", Description: "keep going"}, {Label: "Stop"}}, Multiple: true, Custom: true}}
		h, restart := restartable(t)
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
		h2, _ := restart()
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

// TestAnswerMustBeAnOfferedChoice: a question offering options without
// allow_other takes only their labels, one unless several may be chosen;
// anything else, from any door, is refused (ErrNotAnOption) and the
// question stays pending for a proper answer. With allow_other, free
// text goes besides at most one label unless several may be chosen.
func TestAnswerMustBeAnOfferedChoice(t *testing.T) {
	text := func(ts ...string) []*pb.McpResultContent {
		var cs []*pb.McpResultContent
		for _, s := range ts {
			cs = append(cs, &pb.McpResultContent{Type: 1, Text: &pb.TextContent{Type: "text", Text: s}})
		}
		return cs
	}
	image := &pb.McpResultContent{Type: 2, Image: &pb.ImageContent{Type: "image", Data: "iVBORw0KGgo=", MimeType: "image/png"}}
	opts := []*pb.Option{{Label: "Deploy"}, {Label: "Wait"}}
	cases := []struct {
		name             string
		multiple, custom bool
		answer           []*pb.McpResultContent
		ok               bool
	}{
		{"one label", false, false, text("Deploy"), true},
		{"free text", false, false, text("rm -rf / instead"), false},
		{"a label and free text", false, false, text("Wait", "and then delete the backups"), false},
		{"two labels of one choice", false, false, text("Deploy", "Wait"), false},
		{"nothing", false, false, nil, false},
		{"an image", false, false, []*pb.McpResultContent{image}, false},
		{"a label and an image", false, false, []*pb.McpResultContent{text("Wait")[0], image}, false},
		{"a label typed in another case", false, false, text(" deploy"), true},
		{"two labels typed as a list", true, false, text("deploy, wait"), true},
		{"two labels typed as a list of one choice", false, false, text("deploy, wait"), false},
		{"two labels of several", true, false, text("Deploy", "Wait"), true},
		{"a label twice", true, false, text("Wait", "Wait"), true},
		{"several and free text", true, false, text("Deploy", "now"), false},
		{"free text where allowed", false, true, text("tomorrow"), true},
		{"a label and free text where allowed", false, true, text("Wait", "until noon"), true},
		{"two labels of one choice where text is allowed", false, true, text("Deploy", "Wait"), false},
		{"an image where text is allowed", false, true, []*pb.McpResultContent{image}, true},
	}
	for _, k := range []wire.Kind{wire.AskQuestion, wire.TaskFinish} {
		for _, c := range cases {
			t.Run(k.String()+"/"+c.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h := New(Options{})
					defer h.Close()
					qs := []*pb.Question{{Options: opts, Multiple: c.multiple, Custom: c.custom}}
					got := make(chan *Reply, 1)
					go func() {
						rep, _ := h.Ask(context.Background(), "tok", Request{Kind: k, ID: "q", Text: "Deploy?", Timeout: time.Hour, Questions: qs})
						got <- rep
					}()
					synctest.Wait()
					err := h.Answer(context.Background(), "tok", k, "q", Reply{Contents: c.answer, ClientID: "phone", Door: "ws"})
					if c.ok != (err == nil) {
						t.Fatalf("Answer = %v, want ok %v", err, c.ok)
					}
					if err != nil {
						if !errors.Is(err, ErrNotAnOption) {
							t.Errorf("Answer = %v, want ErrNotAnOption", err)
						}
						// Still pending: the person answers with an option.
						if err := h.Answer(context.Background(), "tok", k, "q", Reply{Contents: text("Wait"), ClientID: "phone"}); err != nil {
							t.Fatalf("an offered option after a refused answer: %v", err)
						}
					}
					if rep := <-got; rep == nil {
						t.Fatal("the agent got no answer")
					}
				})
			})
		}
	}
	// A client's error reply (a device that declines, or fails to show
	// the question) is not an answer to check: it ends the call as an
	// error, whatever the options.
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{})
		defer h.Close()
		got := make(chan *Reply, 1)
		go func() {
			rep, _ := h.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "q", Text: "?", Timeout: time.Hour,
				Questions: []*pb.Question{{Options: opts}}})
			got <- rep
		}()
		synctest.Wait()
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "q", Reply{IsError: true, Contents: text("the person declined")}); err != nil {
			t.Errorf("an error reply to a question of options only: %v", err)
		}
		if rep := <-got; rep == nil || !rep.IsError {
			t.Errorf("the agent got %+v, want the error reply", rep)
		}
	})
	// Without options, anything goes, as before.
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{})
		defer h.Close()
		go func() {
			_, _ = h.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "q", Text: "?", Timeout: time.Hour})
		}()
		synctest.Wait()
		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "q", Reply{Contents: text("anything", "at all")}); err != nil {
			t.Errorf("a question without options: %v", err)
		}
	})
}

// TestAnsweredByIsOneLineOfText: who answered is shown on one line by
// every device and channel, whatever door named it (a webhook's "by", a
// push device's name, a chat's display name): its control characters,
// line separators and bidirectional controls are dropped at the core,
// so U+202E cannot turn the name around and a newline cannot forge a
// second line.
func TestAnsweredByIsOneLineOfText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{})
		defer h.Close()
		got := make(chan *Reply, 1)
		go func() {
			rep, _ := h.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "q", Text: "?", Timeout: time.Hour})
			got <- rep
		}()
		synctest.Wait()
		err := h.Answer(context.Background(), "tok", wire.AskQuestion, "q", Reply{Nickname: " Ana\u202e nimda\n(admin)\u0085\u2028\u2066 \x1b[31m ", ClientID: "webhook:n8n\r\n",
			Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "yes"}}}})
		if err != nil {
			t.Fatal(err)
		}
		rep := <-got
		if rep.Nickname != "Ana nimda(admin) [31m" || rep.ClientID != "webhook:n8n" {
			t.Errorf("answered by %q (%q)", rep.Nickname, rep.ClientID)
		}
	})
}
