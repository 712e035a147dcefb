package wire

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

func TestValidUTF8(t *testing.T) {
	m := &pb.WebsocketMessage{
		Cmd: "ok",
		AskQuestionResponse: &pb.AskQuestionResponse{
			Meta:     map[string]string{"k\xff": "v\xff", "fine": "v\xfe"},
			Contents: []*pb.McpResultContent{{Text: &pb.TextContent{Text: "a\xffb"}}, {Text: &pb.TextContent{Text: "ok"}}},
		},
		StrParam: "s\xc3",
	}
	ValidUTF8(m)
	if _, err := proto.Marshal(m); err != nil {
		t.Fatalf("still not encodable: %v", err)
	}
	r := m.AskQuestionResponse
	if m.StrParam != "s\uFFFD" || r.Contents[0].Text.Text != "a\uFFFDb" || r.Contents[1].Text.Text != "ok" ||
		r.Meta["k\uFFFD"] != "v\uFFFD" || r.Meta["fine"] != "v\uFFFD" || len(r.Meta) != 2 || m.Cmd != "ok" {
		t.Errorf("made valid: %v", m)
	}
	ValidUTF8(nil)
}
