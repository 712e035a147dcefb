package rpc_test

import (
	"context"
	"testing"
	"testing/synctest"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// TestUnknownFieldsGoNoFurther: a client answers through the Reply
// service with a field this server does not know inside its content (a
// megabyte of it). What is checked is what is forwarded: the answer that
// the hub keeps and the agent gets carries the content, not the field.
func TestUnknownFieldsGoNoFurther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, setup{})
		asked := f.askAsync(context.Background(), question("q1", "Ship it?", 60))
		synctest.Wait()
		f.next(t)
		c := &pb.McpResultContent{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Yes."}}
		c.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), make([]byte, 1<<20)))
		ctx, _ := headers(context.Background(), auth.TokenHeader, tokA) // a message over the small bound
		if _, err := f.reply.AskQuestionReply(ctx, &pb.AskQuestionReplyRequest{UserToken: tokA,
			Response: &pb.AskQuestionResponse{ID: "q1", Contents: []*pb.McpResultContent{c}}}); err != nil {
			t.Fatal(err)
		}
		got := <-asked
		if got.err != nil || len(got.resp.GetContents()) != 1 || got.resp.GetContents()[0].GetText().GetText() != "Yes." {
			t.Fatalf("the agent got %d contents, %v", len(got.resp.GetContents()), got.err)
		}
		if n := len(got.resp.GetContents()[0].ProtoReflect().GetUnknown()); n != 0 {
			t.Errorf("the agent's reply carries %d unknown bytes", n)
		}
	})
}
