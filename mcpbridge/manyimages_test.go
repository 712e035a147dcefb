package mcpbridge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// TestAnswerImagesBounded: an answer of a thousand images (a /ws frame
// holds that many small ones) hands the agent at most maxAnswerImages,
// and says how many were left out: a model's API refuses a request of
// more than a hundred images (twenty in some clients), failing the
// agent's every turn that still holds them; and those left out are not
// decoded: an answer of 500 pictures of 4,000 pixels a side, small once
// compressed, took four minutes to fit, the fitting of every other
// answer waiting behind it.
func TestAnswerImagesBounded(t *testing.T) {
	var contents []*pb.McpResultContent
	for range 1000 {
		contents = append(contents, &pb.McpResultContent{Type: 2, Image: &pb.ImageContent{Type: "image", Data: pixelPNG, MimeType: "image/png"}})
	}
	// Past the bound, one that would take a second to fit.
	contents = append(contents, &pb.McpResultContent{Type: 4, EmbeddedResource: &pb.EmbeddedResource{Type: "resource", Uri: "file:///a.png", MimeType: "image/png", Data: deepPNG(t, 2000, 2000, 8)}})
	f := &fakeSrv{ask: func(context.Context, *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
		return &pb.AskQuestionResponse{Contents: contents}, nil
	}}
	began := time.Now()
	r := call(t, newClient(t, f, Options{}), "ask_question", map[string]any{"question": "Screenshots?"}, nil)
	t.Logf("an answer of 1,001 images handed over in %v", time.Since(began))
	images := 0
	for _, c := range r.Content {
		switch c := c.(type) {
		case mcp.ImageContent:
			images++
		case mcp.EmbeddedResource:
			if b, ok := c.Resource.(mcp.BlobResourceContents); ok && strings.HasPrefix(b.MIMEType, "image/") {
				images++
			}
		}
	}
	if images > maxAnswerImages {
		t.Errorf("the agent got %d images, more than %d", images, maxAnswerImages)
	}
	if said := text(r); !strings.Contains(said, "left out") || len(r.Content) > maxAnswerImages+2 {
		t.Errorf("the agent got %d contents, told %.200q", len(r.Content), said)
	}
}

// TestHandedOverImagesBounded: answers given while no agent waited,
// handed over together, hand over maxAnswerImages images in all, not
// that many each.
func TestHandedOverImagesBounded(t *testing.T) {
	var as []*pb.MissedAnswer
	for range 10 {
		var contents []*pb.McpResultContent
		for range maxAnswerImages {
			contents = append(contents, &pb.McpResultContent{Type: 2, Image: &pb.ImageContent{Type: "image", Data: pixelPNG, MimeType: "image/png"}})
		}
		as = append(as, &pb.MissedAnswer{Text: "Screenshots?", Response: &pb.AskQuestionResponse{Contents: contents}})
	}
	r := missedResult(wire.AskQuestion, "ask_question", as, time.Now())
	images := 0
	for _, c := range r.Content {
		if _, ok := c.(mcp.ImageContent); ok {
			images++
		}
	}
	if images > maxAnswerImages {
		t.Errorf("the agent was handed %d images, more than %d", images, maxAnswerImages)
	}
}
