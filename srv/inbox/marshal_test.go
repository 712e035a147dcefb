package inbox

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// A frame with a string that is not UTF-8 goes out with it replaced, and
// leaves the note's shared parts as they were: a panic here would end
// the whole server, on a fan-out's goroutine.
func TestMarshalMakesStringsValid(t *testing.T) {
	contents := []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "yes \xff"}}}
	m := &pb.WebsocketMessage{Cmd: "AskQuestionReplyNotification", Nickname: "A\xfe",
		AskQuestionResponse: &pb.AskQuestionResponse{ID: "q", Contents: contents}}
	var got pb.WebsocketMessage
	if err := proto.Unmarshal(marshal(m), &got); err != nil {
		t.Fatal(err)
	}
	if got.Nickname != "A\uFFFD" || got.GetAskQuestionResponse().GetContents()[0].GetText().GetText() != "yes \uFFFD" {
		t.Errorf("sent %v", &got)
	}
	if contents[0].Text.Text != "yes \xff" || m.Nickname != "A\xfe" {
		t.Error("the note's own parts were changed")
	}
}
