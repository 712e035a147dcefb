package hub

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// TestReplayBytesCountWhatAnAnswerHolds: the replay window is bounded by
// the bytes its answers hold, all of them: an answer's meta, and fields a
// newer client sent that this server does not know, count as its texts
// and images do. Forty answers of 8 MiB each, kept within a minute,
// leave at most the bound and the newest answer in the window, however
// the 8 MiB are carried.
func TestReplayBytesCountWhatAnAnswerHolds(t *testing.T) {
	const each = 8 << 20
	unknown := protowire.AppendBytes(protowire.AppendTag(nil, 99, protowire.BytesType), make([]byte, each))
	for _, tc := range []struct {
		name  string
		reply func() *Reply
	}{
		{"text", func() *Reply {
			return &Reply{Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Text: strings.Repeat("x", each)}}}}
		}},
		{"meta", func() *Reply {
			return &Reply{Meta: map[string]string{"k": strings.Repeat("x", each)}}
		}},
		{"unknown fields", func() *Reply {
			c := &pb.McpResultContent{Type: 1, Text: &pb.TextContent{Text: "yes"}}
			c.ProtoReflect().SetUnknown(unknown)
			return &Reply{Contents: []*pb.McpResultContent{c}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q events
			at := time.Unix(1_700_000_000, 0)
			for i := range 40 {
				q.push(event{seq: uint64(i + 1), at: at.Add(time.Duration(i) * time.Second),
					notes: []*Note{{Kind: NoteAnswered, Request: Request{Text: "q"}, Reply: tc.reply()}}})
			}
			var held int
			for i := range q.len() {
				for _, n := range q.at(i).notes {
					held += len(n.Request.Text)
					for k, v := range n.Reply.Meta {
						held += len(k) + len(v)
					}
					for _, c := range n.Reply.Contents {
						held += proto.Size(c)
					}
				}
			}
			if held > replayBytes+each+1<<10 {
				t.Errorf("the window holds %d answers, %d MiB, past its bound of %d MiB", q.len(), held>>20, replayBytes>>20)
			}
		})
	}
}
