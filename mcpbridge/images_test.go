package mcpbridge

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// pixelPNG is a PNG of one pixel, as an answer carries it.
const pixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// TestAnswerImagesTheAgentCanRead: an answer's images reach the agent
// only as what its model reads, PNG, JPEG, GIF or WebP, typed as their
// bytes are (a vision API refuses an image whose declared type is not
// its data's, and the agent's every turn after it holding the image
// then fails): a PNG sent as image/jpeg goes as image/png; an SVG, a
// HEIC photo, data that is no base64 are each told in words, naming the
// type they came as, and not counted as images.
func TestAnswerImagesTheAgentCanRead(t *testing.T) {
	var pngData bytes.Buffer
	if err := png.Encode(&pngData, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	img := func(mime string, data []byte) *pb.McpResultContent {
		return &pb.McpResultContent{Type: 2, Image: &pb.ImageContent{Type: "image", Data: base64.StdEncoding.EncodeToString(data), MimeType: mime}}
	}
	heic := append([]byte{0, 0, 0, 0x18}, []byte("ftypheic\x00\x00\x00\x00mif1heic")...)
	contents := []*pb.McpResultContent{
		{Type: 1, Text: &pb.TextContent{Type: "text", Text: "Like this."}},
		img("image/jpeg", pngData.Bytes()),
		img("image/svg+xml", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)),
		img("image/heic", heic),
		{Type: 2, Image: &pb.ImageContent{Type: "image", Data: "not base64 at all!", MimeType: "image/png"}},
	}
	f := &fakeSrv{ask: func(context.Context, *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
		return &pb.AskQuestionResponse{Contents: contents}, nil
	}}
	r := call(t, newClient(t, f, Options{}), "ask_question", map[string]any{"question": "Which layout?"}, nil)
	var images []mcp.ImageContent
	for _, c := range r.Content {
		if im, ok := c.(mcp.ImageContent); ok {
			images = append(images, im)
		}
	}
	if len(images) != 1 || images[0].MIMEType != "image/png" || images[0].Data != base64.StdEncoding.EncodeToString(pngData.Bytes()) {
		t.Errorf("the agent got the images %+v, want the one PNG as image/png", images)
	}
	said := text(r)
	for _, want := range []string{"Like this.", `"image/svg+xml"`, `"image/heic"`, `"image/png"`} {
		if !strings.Contains(said, want) {
			t.Errorf("the agent was told %q, without %s", said, want)
		}
	}
	var a struct{ Images int }
	b, _ := json.Marshal(r.StructuredContent)
	if err := json.Unmarshal(b, &a); err != nil || a.Images != 1 {
		t.Errorf("structured content %s, want 1 image", b)
	}
}

// TestAnswerFilesTypedAsTheirBytes: a file in an answer (an embedded
// resource, as the existing agentassistant's Flutter app sends every
// image it attaches) declared as an image a model reads is typed as its
// bytes are: a client that hands such a file to its model as an image
// (Claude Code does, for PNG, JPEG, GIF and WebP) would otherwise send a
// PNG as image/jpeg, or a phone's HEIC photo named .jpg as a JPEG, which
// the model's API refuses, failing every turn that holds it. A file of
// another declared type keeps it.
func TestAnswerFilesTypedAsTheirBytes(t *testing.T) {
	var pngData bytes.Buffer
	if err := png.Encode(&pngData, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	heic := append([]byte{0, 0, 0, 0x18}, []byte("ftypheic\x00\x00\x00\x00mif1heic")...)
	file := func(name, mime string, data []byte) *pb.McpResultContent {
		return &pb.McpResultContent{Type: 4, EmbeddedResource: &pb.EmbeddedResource{Type: "embedded_resource", Uri: "file://" + name, MimeType: mime, Data: data}}
	}
	f := &fakeSrv{ask: func(context.Context, *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
		return &pb.AskQuestionResponse{Contents: []*pb.McpResultContent{
			file("screen.jpg", "image/jpeg", pngData.Bytes()),
			file("IMG_0001.jpg", "image/jpeg", heic),
			file("IMG_0002.heic", "image/heic", heic),
			file("report.pdf", "application/pdf", []byte("%PDF-1.7\n")),
		}}, nil
	}}
	r := call(t, newClient(t, f, Options{}), "ask_question", map[string]any{"question": "Which layout?"}, nil)
	want := map[string]string{"file://screen.jpg": "image/png", "file://IMG_0001.jpg": "application/octet-stream",
		"file://IMG_0002.heic": "image/heic", "file://report.pdf": "application/pdf"}
	got := map[string]string{}
	for _, c := range r.Content {
		if e, ok := c.(mcp.EmbeddedResource); ok {
			if b, ok := e.Resource.(mcp.BlobResourceContents); ok {
				got[b.URI] = b.MIMEType
			}
		}
	}
	for uri, mime := range want {
		if got[uri] != mime {
			t.Errorf("%s handed as %q, want %q", uri, got[uri], mime)
		}
	}
}
