package hub

import (
	"context"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// An answer whose text is not UTF-8 (an e-mail body declared UTF-8 that
// is not) is told, saved and returned with the bad bytes replaced, not
// dropped: every door can encode it (protobuf refuses such a string, and
// the /ws door would have nothing to send), and what the person wrote
// around them is kept.
func TestAnswerNotUTF8IsMadeValid(t *testing.T) {
	db, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := New(Options{Store: db})
	defer h.Close()
	a := newFake("a")
	h.Join("tok", a, nil, Resume{})
	rc, ec := ask(h, "tok", "q", time.Minute, context.Background())
	a.waitFor(t, NoteAsked)
	text := &pb.McpResultContent{Type: 1, Text: &pb.TextContent{Type: "text", Text: "yes \xff please"}}
	if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "q", Reply{Contents: []*pb.McpResultContent{text},
		ClientID: "email:a@x", Nickname: "A\xfe", Meta: map[string]string{"k\xff": "v\xff"}}); err != nil {
		t.Fatal(err)
	}
	const want = "yes \uFFFD please"
	check := func(where string, rep *Reply) {
		t.Helper()
		if rep == nil || len(rep.Contents) != 1 || rep.Contents[0].GetText().GetText() != want {
			t.Fatalf("%s: %+v, want the text %q", where, rep, want)
		}
		if !utf8.ValidString(rep.Nickname) || rep.Nickname != "A\uFFFD" {
			t.Errorf("%s: nickname %q", where, rep.Nickname)
		}
		for k, v := range rep.Meta {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				t.Errorf("%s: meta %q: %q", where, k, v)
			}
		}
		if _, err := proto.Marshal(&pb.AskQuestionResponse{Contents: rep.Contents, Meta: rep.Meta}); err != nil {
			t.Errorf("%s: not encodable: %v", where, err)
		}
	}
	if err := <-ec; err != nil {
		t.Fatal(err)
	}
	check("the agent's", <-rc)
	check("the screens'", a.waitFor(t, NoteAnswered).Reply)
	past, _, err := h.History("tok", time.Now().Add(time.Hour), 10)
	if err != nil || len(past) != 1 {
		t.Fatalf("history: %v %v", past, err)
	}
	check("the history's", past[0].Reply)
}
