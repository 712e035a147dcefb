package hub

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

func TestStoredRepliesKeepWhoAnswered(t *testing.T) {
	for _, rep := range []*Reply{
		{ClientID: "c1", Nickname: "phone", Meta: map[string]string{"k": "v"}, IsError: true,
			Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "yes"}}}},
		{ClientID: "c2"},
	} {
		got := decodeReply(encodeReply(rep))
		if got.ClientID != rep.ClientID || got.Nickname != rep.Nickname || got.IsError != rep.IsError ||
			fmt.Sprint(got.Meta) != fmt.Sprint(rep.Meta) || len(got.Contents) != len(rep.Contents) {
			t.Fatalf("decoded %+v, want %+v", got, rep)
		}
		for i := range rep.Contents {
			if !proto.Equal(got.Contents[i], rep.Contents[i]) {
				t.Fatalf("content %d: %v, want %v", i, got.Contents[i], rep.Contents[i])
			}
		}
		if rep.Meta != nil && len(rep.Meta) != 1 {
			t.Fatal("encoding changed the caller's map")
		}
	}
}
