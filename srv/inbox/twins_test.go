package inbox

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestImageAnswerKeptOnce: a task report's answer goes out as two
// frames, one under each generation's Cmd, and the note keeps them for
// the replay ring. With an image in the answer they hold it once
// between them, not once each: encoding the note allocates about one
// frame, and each frame still reads as its message.
func TestImageAnswerKeptOnce(t *testing.T) {
	const size = 4 << 20
	image := strings.Repeat("A", size) // base64, as an MCP image's data is
	note := func() *hub.Note {
		return &hub.Note{Kind: hub.NoteAnswered, Seq: 42, Token: "tok", AskedAt: time.UnixMilli(1700000000000),
			Request: hub.Request{Kind: wire.TaskFinish, ID: "r1", Text: "Deployed.", ProjectDirectory: "/src/shop"},
			Reply: &hub.Reply{ClientID: "c1", Nickname: "Pixel 8", Contents: []*pb.McpResultContent{
				{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Looks right"}},
				{Type: 2, Image: &pb.ImageContent{Type: "image", Data: image, MimeType: "image/png"}},
			}}}
	}
	n := note()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	frames := n.Encoded(encode)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > size+size/2 {
		t.Errorf("encoding an answer with a %d-byte image allocated %d bytes: its frames hold it more than once", size, got)
	}
	want := Messages(note())
	if len(frames) != len(want) || len(want) != 2 {
		t.Fatalf("%d frames, %d messages; want 2", len(frames), len(want))
	}
	for i, f := range frames {
		var got pb.WebsocketMessage
		if err := proto.Unmarshal(f, &got); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !proto.Equal(&got, want[i]) {
			t.Errorf("frame %d reads as %s, want %s", i, got.Cmd, want[i].Cmd)
		}
	}
	if frames[0][0] != 0x0a {
		t.Error("the first frame does not start with its Cmd (field 1), as every other frame does")
	}
}
