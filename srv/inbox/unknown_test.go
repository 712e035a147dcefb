package inbox_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

// TestUnknownFieldsGoNoFurther: a device answers with a field this
// server does not know inside its content (a megabyte of it). What the
// server checked is what it forwards: the other device's notice and the
// agent's reply carry the answer, not the field.
func TestUnknownFieldsGoNoFurther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, inbox.Options{})
		a := f.login(t, tokA, "a")
		b := f.login(t, tokA, "b")
		got := make(chan *hub.Reply, 1)
		go func() {
			r, _ := f.hub.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q1", Text: "Go?", Timeout: time.Minute})
			got <- r
		}()
		expect(t, a, wire.CmdAskQuestion)
		expect(t, b, wire.CmdAskQuestion)
		c := &pb.McpResultContent{Type: 1, Text: &pb.TextContent{Type: "text", Text: "yes"}}
		c.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), make([]byte, 1<<20)))
		send(t, a, &pb.WebsocketMessage{Cmd: wire.CmdAskQuestionReply, AskQuestionRequest: &pb.AskQuestionRequest{ID: "q1"},
			AskQuestionResponse: &pb.AskQuestionResponse{ID: "q1", Contents: []*pb.McpResultContent{c}}})
		n := expect(t, b, wire.CmdAskQuestionReplyNotification).GetAskQuestionResponse().GetContents()
		r := <-got
		if len(n) != 1 || n[0].GetText().GetText() != "yes" || len(n[0].ProtoReflect().GetUnknown()) != 0 {
			t.Errorf("the other device got %d contents, %q, %d unknown bytes", len(n), n[0].GetText().GetText(), len(n[0].ProtoReflect().GetUnknown()))
		}
		if r == nil || len(r.Contents) != 1 {
			t.Fatal("the agent got no answer")
		}
		if n := len(r.Contents[0].ProtoReflect().GetUnknown()); n != 0 {
			t.Errorf("the agent's reply carries %d unknown bytes", n)
		}
	})
}
