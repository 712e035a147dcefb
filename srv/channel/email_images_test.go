package channel

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// pngOf is a small PNG of one colour.
func pngOf(t *testing.T, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for i := range 16 {
		img.Set(i%4, i/4, c)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// heic is the start of a HEIC photo (its ftyp box), as an iPhone sends.
var heic = append([]byte("\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic"), make([]byte, 64)...)

// jpegOf is n bytes that begin as a JPEG does.
func jpegOf(n int, fill byte) []byte {
	return append([]byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00"), bytes.Repeat([]byte{fill}, n)...)
}

// filePart is a MIME part holding data in base64, with header lines.
func filePart(data []byte, header ...string) string {
	enc := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	for _, h := range header {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("Content-Transfer-Encoding: base64\r\n\r\n")
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc + "\r\n")
	return b.String()
}

// multipart is a multipart body of parts with the boundary.
func multipart(boundary string, parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString("--" + boundary + "\r\n" + p)
	}
	b.WriteString("--" + boundary + "--\r\n")
	return b.String()
}

// images are the images of an answer, as their types and data.
func imagesOf(t *testing.T, cs []*pb.McpResultContent) (types []string, data [][]byte) {
	t.Helper()
	for _, c := range cs {
		if img := c.GetImage(); img != nil {
			b, err := base64.StdEncoding.DecodeString(img.GetData())
			if err != nil {
				t.Fatal(err)
			}
			types, data = append(types, img.GetMimeType()), append(data, b)
		}
	}
	return types, data
}

// TestEmailReplyCarriesItsImages: the images a person attaches to a
// reply reach the agent after its text, typed by their bytes (a HEIC
// sent as image/jpeg, a PNG as application/octet-stream); a signature's
// logo the HTML shows (cid:) and the quoted original's image are none
// of them, and a PDF is left out with a word to the agent.
func TestEmailReplyCarriesItsImages(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	f := newFixture(t, map[string][]Channel{tokA: {newEmail(sink, box, logs)}}, Options{})
	answered := f.ask(tokA, "q-1")
	_, h, _ := sink.wait(t, 1)
	id, _ := h.MessageID()

	logo, shot := pngOf(t, color.RGBA{R: 200, A: 255}), pngOf(t, color.RGBA{B: 200, A: 255})
	original := "Content-Type: message/rfc822\r\nContent-Disposition: attachment\r\n\r\n" +
		"Subject: Deploy?\r\nContent-Type: multipart/mixed; boundary=\"q\"\r\n\r\n" +
		multipart("q", "Content-Type: text/plain\r\n\r\nDeploy?\r\n", filePart(jpegOf(100, 1), "Content-Type: image/jpeg", "Content-Disposition: attachment"))
	body := multipart("m",
		"Content-Type: multipart/related; boundary=\"r\"\r\n\r\n"+multipart("r",
			"Content-Type: multipart/alternative; boundary=\"a\"\r\n\r\n"+multipart("a",
				"Content-Type: text/plain; charset=utf-8\r\n\r\nHere is the bug.\r\n\r\nOn Fri, aa wrote:\r\n> Deploy?\r\n",
				"Content-Type: text/html; charset=utf-8\r\n\r\n<p>Here is the bug.</p><p><img src=\"CID:logo%40corp\"></p>\r\n"),
			filePart(logo, "Content-Type: image/png", "Content-ID: <logo@corp>", "Content-Disposition: inline")),
		filePart(shot, "Content-Type: application/octet-stream", "Content-Disposition: attachment; filename=shot"),
		filePart(heic, "Content-Type: image/jpeg", "Content-Disposition: attachment; filename=IMG_1.HEIC"),
		filePart([]byte("%PDF-1.4\n%\xe2\xe3\n1 0 obj"), "Content-Type: application/pdf", "Content-Disposition: attachment; filename=report.pdf"),
		original)
	box.deliverRaw(t, replyHeader(id, "MIME-Version: 1.0", `Content-Type: multipart/mixed; boundary="m"`), body)

	rep := waitAnswer(t, answered, logs)
	if got := rep.Contents[0].GetText().GetText(); got != "Here is the bug." {
		t.Errorf("the agent got the text %q", got)
	}
	types, data := imagesOf(t, rep.Contents)
	if strings.Join(types, " ") != "image/png image/heic" || !bytes.Equal(data[0], shot) || !bytes.Equal(data[1], heic) {
		t.Fatalf("the agent got the images %v, want the screenshot (image/png) and the photo (image/heic)", types)
	}
	last := rep.Contents[len(rep.Contents)-1].GetText().GetText()
	if !strings.Contains(last, "1 file not taken as an image") {
		t.Errorf("the agent was not told of the PDF left out: %q", last)
	}
}

// TestEmailReplyImagesBounded: a reply with more images than an answer
// takes answers with its text and the first four, and the agent is told
// how many were left out; so does one whose images are larger in all
// than an answer takes, read without fetching the one left out.
func TestEmailReplyImagesBounded(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	proxy := newCountingProxy(t, box.addr)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	e := newEmail(sink, box, logs)
	e.IMAPAddr = proxy.addr
	f := newFixture(t, map[string][]Channel{tokA: {e}}, Options{})
	text := "Content-Type: text/plain\r\n\r\nAll of them.\r\n"

	answered := f.ask(tokA, "q-1")
	_, h, _ := sink.wait(t, 1)
	id, _ := h.MessageID()
	parts := []string{text}
	for i := range 5 {
		parts = append(parts, filePart(jpegOf(1000, byte(i)), "Content-Type: image/jpeg", "Content-Disposition: attachment"))
	}
	box.deliverRaw(t, replyHeader(id, "MIME-Version: 1.0", `Content-Type: multipart/mixed; boundary="m"`), multipart("m", parts...))
	rep := waitAnswer(t, answered, logs)
	if types, _ := imagesOf(t, rep.Contents); len(types) != maxReplyImages {
		t.Errorf("the agent got %d images of five, want %d", len(types), maxReplyImages)
	}
	if last := rep.Contents[len(rep.Contents)-1].GetText().GetText(); !strings.Contains(last, "1 image over the limit of 4 images and 8 MiB") {
		t.Errorf("the agent was not told of the image left out: %q", last)
	}
	if rep.Contents[0].GetText().GetText() != "All of them." {
		t.Errorf("the answer's text is %q", rep.Contents[0].GetText().GetText())
	}

	second := f.ask(tokA, "q-2")
	_, h, _ = sink.wait(t, 3) // the second is the first question's follow-up
	id, _ = h.MessageID()
	big := []string{text}
	for i := range 3 {
		big = append(big, filePart(jpegOf(3<<20, byte(i)), "Content-Type: image/jpeg", "Content-Disposition: attachment"))
	}
	before := proxy.got.Load()
	box.deliverRaw(t, replyHeader(id, "MIME-Version: 1.0", `Content-Type: multipart/mixed; boundary="m"`), multipart("m", big...))
	rep = waitAnswer(t, second, logs)
	if types, data := imagesOf(t, rep.Contents); len(types) != 2 || len(data[0]) != 3<<20+11 {
		t.Errorf("the agent got %d images of three of 3 MiB, want 2 whole", len(types))
	}
	if last := rep.Contents[len(rep.Contents)-1].GetText().GetText(); !strings.Contains(last, "1 image over the limit") {
		t.Errorf("the agent was not told of the image left out: %q", last)
	}
	if got := proxy.got.Load() - before; got > 9<<20 {
		t.Errorf("read %d bytes from the IMAP server for two images of 3 MiB", got)
	}
}

// TestEmailOptionsOnlyReplyWithPhoto: a question that takes only its
// options takes no image: a reply naming an option with a photo answers
// with the option, the photo left out.
func TestEmailOptionsOnlyReplyWithPhoto(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	f := newFixture(t, map[string][]Channel{tokA: {newEmail(sink, box, logs)}}, Options{})
	answered := f.askChoices(tokA, "q-1")
	_, h, _ := sink.wait(t, 1)
	id, _ := h.MessageID()
	box.deliverRaw(t, replyHeader(id, "MIME-Version: 1.0", `Content-Type: multipart/mixed; boundary="m"`), multipart("m",
		"Content-Type: text/plain\r\n\r\nShip it\r\n", filePart(pngOf(t, color.Black), "Content-Type: image/png", "Content-Disposition: attachment")))
	rep := waitAnswer(t, answered, logs)
	if len(rep.Contents) != 1 || rep.Contents[0].GetText().GetText() != "Ship it" {
		t.Fatalf("the agent got %v, want the option alone", rep.Contents)
	}
	logs.waitFor(t, "its question takes only its options")
}

// TestEmailReplyManyImagesCounted: a reply of a few hundred KiB holding
// forty tiny images and a PDF past them answers with its text and the
// first four; the agent is told of every file left out, not of those
// the server looked at alone.
func TestEmailReplyManyImagesCounted(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	f := newFixture(t, map[string][]Channel{tokA: {newEmail(sink, box, logs)}}, Options{})
	answered := f.ask(tokA, "q-1")
	_, h, _ := sink.wait(t, 1)
	id, _ := h.MessageID()
	parts := []string{"Content-Type: text/plain\r\n\r\nAll of them.\r\n"}
	for i := range 40 {
		parts = append(parts, filePart(jpegOf(16, byte(i)), "Content-Type: image/jpeg", "Content-Disposition: attachment"))
	}
	parts = append(parts, filePart([]byte("%PDF-1.4\n"), "Content-Type: application/pdf", "Content-Disposition: attachment"))
	box.deliverRaw(t, replyHeader(id, "MIME-Version: 1.0", `Content-Type: multipart/mixed; boundary="m"`), multipart("m", parts...))
	rep := waitAnswer(t, answered, logs)
	if types, _ := imagesOf(t, rep.Contents); len(types) != maxReplyImages {
		t.Errorf("the agent got %d images of forty, want %d", len(types), maxReplyImages)
	}
	if last := rep.Contents[len(rep.Contents)-1].GetText().GetText(); !strings.Contains(last, "36 images over the limit") || !strings.Contains(last, "1 file not taken") {
		t.Errorf("the agent was told %q, want 36 images and 1 file left out", last)
	}
}

// TestEmailReplyOfNoImageTold: a reply with no text of its own whose
// files are none an answer takes (a PDF, and an "image/png" whose bytes
// are HTML) is told why, the files named among the reasons.
func TestEmailReplyOfNoImageTold(t *testing.T) {
	sink, box := newSMTPSink(t), newIMAPBox(t)
	logs := &syncBuffer{wake: make(chan struct{}, 1)}
	f := newFixture(t, map[string][]Channel{tokA: {newEmail(sink, box, logs)}}, Options{})
	f.ask(tokA, "q-1")
	_, h, _ := sink.wait(t, 1)
	id, _ := h.MessageID()
	box.deliverRaw(t, replyHeader(id, "MIME-Version: 1.0", `Content-Type: multipart/mixed; boundary="m"`), multipart("m",
		filePart([]byte("%PDF-1.4\n"), "Content-Type: application/pdf", "Content-Disposition: attachment"),
		filePart([]byte("<html><script>alert(1)</script></html>"), "Content-Type: image/png", "Content-Disposition: attachment; filename=x.png")))
	_, _, body := sink.wait(t, 2)
	if !strings.Contains(body, "no text of its own") || !strings.Contains(body, "2 files not taken as an image") {
		t.Errorf("the person was told:\n%s", body)
	}
}
