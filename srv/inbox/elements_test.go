package inbox_test

import (
	"runtime"
	"strings"
	"testing"
	"testing/synctest"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/gorilla/websocket"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

// TestFrameOfMillionsOfEmptyItemsRefused: a logged-in client sends a
// reply whose contents are 2.5 million empty items, a frame of 5 MB,
// under the frame bound. Decoded, it would be some 290 MiB of structs;
// the server refuses it from its bytes, without decoding it, says why,
// and the connection goes on.
func TestFrameOfMillionsOfEmptyItemsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, inbox.Options{})
		c := f.login(t, tokA, "phone")

		const items = 2_500_000
		var contents []byte
		for range items {
			contents = protowire.AppendTag(contents, 4, protowire.BytesType) // AskQuestionResponse.contents
			contents = protowire.AppendVarint(contents, 0)
		}
		head, err := proto.Marshal(&pb.WebsocketMessage{Cmd: wire.CmdAskQuestionReply})
		if err != nil {
			t.Fatal(err)
		}
		frame := protowire.AppendTag(head, 4, protowire.BytesType) // WebsocketMessage.AskQuestionResponse
		frame = protowire.AppendBytes(frame, contents)
		var check pb.WebsocketMessage
		if err := proto.Unmarshal(frame, &check); err != nil || len(check.GetAskQuestionResponse().GetContents()) != items {
			t.Fatalf("the frame is not what the test means: %d items, %v", len(check.GetAskQuestionResponse().GetContents()), err)
		}
		check.Reset()

		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if err := c.SendRaw(websocket.BinaryMessage, frame); err != nil {
			t.Fatal(err)
		}
		e := expect(t, c, wire.CmdError).GetError()
		runtime.ReadMemStats(&after)
		allocated := (after.TotalAlloc - before.TotalAlloc) >> 20
		t.Logf("a frame of %d KiB, %d items: %d MiB allocated while it was handled", len(frame)>>10, items, allocated)
		if e.GetCode() != "malformed_frame" || !strings.Contains(e.GetMessage(), "more than") {
			t.Errorf("error = %v", e)
		}
		if allocated > 64 {
			t.Errorf("%d MiB allocated for a frame of %d KiB", allocated, len(frame)>>10)
		}
		send(t, c, &pb.WebsocketMessage{Cmd: wire.CmdGetPendingMessages, GetPendingMessagesRequest: &pb.GetPendingMessagesRequest{}})
		expect(t, c, wire.CmdGetPendingMessages)
	})
}
