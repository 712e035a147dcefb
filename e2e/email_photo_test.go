package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestEmailReplyWithPhotoReachesTheAgent: as docs/channels.md tells a
// newcomer, an agent asks through agentassistant-mcp with options, the
// question is mailed, and the person replies from a mail program with
// a line of their own and a photo attached, the question quoted below:
// the agent has the line and the photo's bytes, the quote left out.
func TestEmailReplyWithPhotoReachesTheAgent(t *testing.T) {
	sink := startMailSink(t)
	box := startMailbox(t)
	s := startSingle(t, freePort(t), t.TempDir(), emailConfig(sink, box))
	agent := startMCP(t, s, tokenA)
	done := make(chan callResult, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "ask_question"
		req.Params.Arguments = map[string]any{"question": "Ship the new header?",
			"options": []map[string]any{{"label": "Ship it"}, {"label": "Wait", "description": "Keep the old one"}}}
		r, err := agent.CallTool(context.Background(), req)
		done <- callResult{r, err}
	}()
	asked := sink.question(t, "Ship the new header?")
	if body, _ := io.ReadAll(asked.Body); !bytes.Contains(body, []byte("Ship it")) || !bytes.Contains(body, []byte("Keep the old one")) {
		t.Errorf("the mail does not show the options:\n%s", body)
	}
	var pic bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 3, 3))
	img.Set(1, 1, color.RGBA{B: 200, A: 255})
	if err := png.Encode(&pic, img); err != nil {
		t.Fatal(err)
	}
	id := messageID(asked)
	box.deliver(t, fmt.Sprintf("From: %s\r\nTo: %s\r\nSubject: Re: the question\r\nMessage-ID: <reply-photo@example.org>\r\n"+
		"In-Reply-To: <%s>\r\nReferences: <%s>\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b1\r\n\r\n"+
		"--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nWait: the logo is cut, see the photo.\r\n\r\nOn Sunday, Agent Assistant wrote:\r\n> Ship the new header?\r\n"+
		"--b1\r\nContent-Type: image/png; name=\"header.png\"\r\nContent-Disposition: attachment; filename=\"header.png\"\r\nContent-Transfer-Encoding: base64\r\n\r\n%s\r\n--b1--\r\n",
		mailPerson, mailAA, id, id, base64.StdEncoding.EncodeToString(pic.Bytes())))
	r := <-done
	if r.err != nil || r.r.IsError || resultText(r.r) != "Wait: the logo is cut, see the photo." {
		t.Fatalf("the agent got %+v %v: %q", r.r, r.err, resultText(r.r))
	}
	var got []byte
	for _, c := range r.r.Content {
		if ic, ok := mcp.AsImageContent(c); ok {
			got, _ = base64.StdEncoding.DecodeString(ic.Data)
		}
	}
	if !bytes.Equal(got, pic.Bytes()) {
		t.Errorf("the agent's image: %d bytes, want the photo's %d", len(got), pic.Len())
	}
}
