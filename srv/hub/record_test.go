package hub

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/store"
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

// The reply a process applies from its own write is the reply another
// instance decodes from the record.
func TestKeptReplyIsTheDecodedOne(t *testing.T) {
	text := []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "yes"}}}
	for _, rep := range []*Reply{
		{ClientID: "c1", Nickname: "phone", Meta: map[string]string{"k": "v"}, IsError: true, Contents: text, Door: "ws"},
		{ClientID: "c2", Meta: map[string]string{}},
		{Nickname: "pc", Door: "connect"},
		{ClientID: "c3", Meta: map[string]string{"\x00clientId": "forged", "k": "v"}, Contents: text},
	} {
		want := replyOf(store.Record{Reply: encodeReply(rep), ReplyDoor: rep.Door})
		got := keptReply(rep)
		if got == nil {
			got = want // decoded after all
		}
		if got.ClientID != want.ClientID || got.Nickname != want.Nickname || got.IsError != want.IsError || got.Door != want.Door ||
			fmt.Sprint(got.Meta) != fmt.Sprint(want.Meta) || (got.Meta == nil) != (want.Meta == nil) || len(got.Contents) != len(want.Contents) {
			t.Fatalf("kept %+v, decoded %+v", got, want)
		}
		for i := range want.Contents {
			if !proto.Equal(got.Contents[i], want.Contents[i]) {
				t.Fatalf("content %d: %v, decoded %v", i, got.Contents[i], want.Contents[i])
			}
		}
	}
	if keptReply(nil) != nil {
		t.Fatal("a reply kept for no answer")
	}
}
