package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/jpeg"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// TestPhoneImageFitThroughMCP: a photo a phone client sends as it is,
// as the existing agentassistant's Flutter app does (a file, 2400
// pixels wide), reaches the agent through the server and the MCP binary
// fit for its model: a JPEG at most 1568 pixels on its long side.
func TestPhoneImageFitThroughMCP(t *testing.T) {
	s := startServer(t, tokenA)
	phone := dial(t, s, tokenA, "phone")
	agent := startMCP(t, s, tokenA)

	m := image.NewYCbCr(image.Rect(0, 0, 2400, 1800), image.YCbCrSubsampleRatio420)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(m.Y)
	var photo bytes.Buffer
	if err := jpeg.Encode(&photo, m, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}

	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := callTool(context.Background(), agent, "ask_question", map[string]any{"question": "What does it show?"})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	q := must[*pb.WebsocketMessage](t)(phone.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
	reply := wstest.TextReply(q.GetID(), "This.")
	reply.AskQuestionResponse.Contents = append(reply.AskQuestionResponse.Contents, &pb.McpResultContent{Type: 4,
		EmbeddedResource: &pb.EmbeddedResource{Type: "embedded_resource", Uri: "file://IMG_0001.jpg", MimeType: "image/jpeg", Data: photo.Bytes()}})
	if err := phone.Send(reply); err != nil {
		t.Fatal(err)
	}
	var r *mcp.CallToolResult
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("MCP call did not return after the reply")
	}
	if r == nil || len(r.Content) != 2 {
		t.Fatalf("result = %+v", r)
	}
	e, ok := r.Content[1].(mcp.EmbeddedResource)
	b, ok2 := e.Resource.(mcp.BlobResourceContents)
	if !ok || !ok2 || b.MIMEType != "image/jpeg" {
		t.Fatalf("the photo came as %+v", r.Content[1])
	}
	data, err := base64.StdEncoding.DecodeString(b.Blob)
	if err != nil {
		t.Fatal(err)
	}
	got, err := jpeg.DecodeConfig(bytes.NewReader(data))
	if err != nil || got.Width != 1568 || got.Height != 1176 {
		t.Errorf("the photo came %d×%d (%v), want 1568×1176", got.Width, got.Height, err)
	}
}
