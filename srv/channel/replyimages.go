package channel

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// The images a reply by mail or in Slack carries into its answer: at most
// maxReplyImages of them, maxReplyImageBytes in all (their base64 stays
// well within the 16 MiB of an answer a client sends). They go on as
// they are: what reads the answer fits them to a model.
const (
	maxReplyImages     = 4
	maxReplyImageBytes = 8 << 20
)

// tooLarge is why a reply whose images make an answer larger than the
// store takes (a cluster's NATS max_payload) is not taken.
const tooLarge = "its images make the answer too large for this server to save; reply with smaller images or none, or answer in the app."

// heifBrands are the ISO BMFF brands of a HEIC/HEIF image (a phone's
// photo), which http.DetectContentType does not know.
var heifBrands = []string{"heic", "heix", "hevc", "hevx", "heim", "heis", "hevm", "hevs", "mif1", "msf1"}

// imageType is the media type of data when its bytes are an image an
// answer carries (PNG, JPEG, GIF, WebP, HEIC), "" when they are not.
func imageType(data []byte) string {
	if len(data) >= 12 && string(data[4:8]) == "ftyp" {
		for _, b := range heifBrands {
			if string(data[8:12]) == b {
				return "image/heic"
			}
		}
	}
	switch t := http.DetectContentType(data); t {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return t
	}
	return ""
}

// replyImages gathers a reply's images within the bounds, and counts
// what it leaves out.
type replyImages struct {
	got   []*pb.McpResultContent
	bytes int
	// over: images past the bounds; files: files that are no image.
	over, files int
}

// fits reports whether an image of size bytes (a guess when unread) is
// within the bounds; one that is not is counted left out.
func (r *replyImages) fits(size int) bool {
	if len(r.got) >= maxReplyImages || r.bytes+size > maxReplyImageBytes {
		r.over++
		return false
	}
	return true
}

// add takes data (at most maxReplyImageBytes+1 bytes read of a file) as
// an image when its bytes are one and it fits.
func (r *replyImages) add(data []byte) {
	t := imageType(data)
	switch {
	case t == "":
		r.files++
	case r.fits(len(data)):
		r.bytes += len(data)
		r.got = append(r.got, &pb.McpResultContent{Type: 2, Image: &pb.ImageContent{Type: "image", Data: base64.StdEncoding.EncodeToString(data), MimeType: t}})
	}
}

// room is how many bytes the next image may have.
func (r *replyImages) room() int { return max(0, maxReplyImageBytes-r.bytes) }

// note tells the agent what the reply held that its answer does not;
// "" when nothing was left out.
func (r *replyImages) note() string {
	if l := r.left(); l != "" {
		return "[Left out of this reply: " + l + ".]"
	}
	return ""
}

// left is what was left out, "" when nothing was.
func (r *replyImages) left() string {
	var parts []string
	if r.over > 0 {
		parts = append(parts, fmt.Sprintf("%s over the limit of %d images and %d MiB", count(r.over, "image"), maxReplyImages, maxReplyImageBytes>>20))
	}
	if r.files > 0 {
		parts = append(parts, count(r.files, "file")+" not taken as an image (PNG, JPEG, GIF, WebP or HEIC)")
	}
	return strings.Join(parts, "; ")
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprint(n, " ", what, "s")
}

// with is an answer of text (as the question reads it) with the images
// after it, and the note of what was left out.
func (r *replyImages) with(text []*pb.McpResultContent) []*pb.McpResultContent {
	all := append(append([]*pb.McpResultContent(nil), text...), r.got...)
	if n := r.note(); n != "" {
		all = append(all, textContent(n))
	}
	return all
}
