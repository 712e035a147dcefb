package inbox_test

import (
	"context"
	"testing"
	"testing/synctest"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv/inbox"
)

// upstreamLast is the last WebsocketMessage field upstream declares: its
// generation with options (the interreactiveui-askquetion branch) has
// fields 1 to 28, every one a string or a message (25 to 28 are its
// ForwardState… messages).
const upstreamLast = 28

// lengthDelimitedUpTo28 fails t for each field of m numbered 1 to 28 that
// is not length-delimited on the wire. That generation's web UI decodes
// frames with protobuf-es, which reads a field as the type it declares
// whatever the wire type says: a varint there ("premature EOF") makes
// the whole frame undecodable, and the page shows nothing of it.
func lengthDelimitedUpTo28(t *testing.T, m *pb.WebsocketMessage) {
	t.Helper()
	b, err := proto.Marshal(m) // unknown fields included, as they came
	if err != nil {
		t.Fatal(err)
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("%s frame: %v", m.Cmd, protowire.ParseError(n))
		}
		b = b[n:]
		if num <= upstreamLast && typ != protowire.BytesType {
			t.Errorf("%s frame: field %d has wire type %d; upstream's web UI declares it a string or a message", m.Cmd, num, typ)
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			t.Fatalf("%s frame: %v", m.Cmd, protowire.ParseError(n))
		}
		b = b[n:]
	}
}

// TestFramesDecodeInUpstreamInteractiveUI: every frame a room's client
// is sent, its requests numbered for resuming included, uses the field
// numbers upstream declares only as strings or messages, so upstream's
// web UI of its generation with options decodes them all.
func TestFramesDecodeInUpstreamInteractiveUI(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := start(t, inbox.Options{})
		web := f.login(t, tokA, "upstream web")
		phone := f.login(t, tokA, "phone")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		check := func(c *wstest.Client, cmd string) *pb.WebsocketMessage {
			t.Helper()
			m := expect(t, c, cmd)
			lengthDelimitedUpTo28(t, m)
			return m
		}
		ask(f.hub, ctx, wire.AskQuestion, "q")
		check(web, wire.CmdAskQuestion)
		ask(f.hub, ctx, wire.TaskFinish, "t")
		check(web, wire.CmdTaskFinish)
		if m := check(web, wire.CmdWorkReport); m.GetSeq() == 0 {
			t.Fatal("the request is not numbered: nothing here to check")
		}
		send(t, web, &pb.WebsocketMessage{Cmd: wire.CmdGetPendingMessages})
		check(web, wire.CmdGetPendingMessages)
		send(t, web, &pb.WebsocketMessage{Cmd: wire.CmdGetOnlineUsers})
		check(web, wire.CmdGetOnlineUsers)
		send(t, phone, &pb.WebsocketMessage{
			Cmd:                 wire.CmdAskQuestionReply,
			AskQuestionRequest:  &pb.AskQuestionRequest{ID: "q"},
			AskQuestionResponse: &pb.AskQuestionResponse{ID: "q", Contents: []*pb.McpResultContent{{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Yes"}}}},
		})
		check(web, wire.CmdAskQuestionReplyNotification)
		if err := f.hub.Cancel(ctx, tokA, "t"); err != nil {
			t.Fatal(err)
		}
		check(web, wire.CmdRequestCancelled)
	})
}
