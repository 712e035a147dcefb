package mcpbridge

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// answered is what the agent is handed for an answer of contents.
func answered(t *testing.T, contents ...*pb.McpResultContent) *mcp.CallToolResult {
	t.Helper()
	f := &fakeSrv{ask: func(context.Context, *pb.AskQuestionRequest) (*pb.AskQuestionResponse, error) {
		return &pb.AskQuestionResponse{Contents: contents}, nil
	}}
	return call(t, newClient(t, f, Options{}), "ask_question", map[string]any{"question": "Which layout?"}, nil)
}

func imageAnswer(mime string, data []byte) *pb.McpResultContent {
	return &pb.McpResultContent{Type: 2, Image: &pb.ImageContent{Type: "image", Data: base64.StdEncoding.EncodeToString(data), MimeType: mime}}
}

func fileAnswer(name, mime string, data []byte) *pb.McpResultContent {
	return &pb.McpResultContent{Type: 4, EmbeddedResource: &pb.EmbeddedResource{Type: "embedded_resource", Uri: "file://" + name, MimeType: mime, Data: data}}
}

// noise is a w×h image of seeded random colours, the hardest to
// compress: alpha 0 where see is true, else opaque.
func noise(w, h int, see func(x, y int) bool) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	_, _ = rand.NewChaCha8([32]byte{byte(w), byte(h)}).Read(m.Pix)
	for i := 3; i < len(m.Pix); i += 4 {
		m.Pix[i] = 0xff
		if see != nil && see((i/4)%w, (i/4)/w) {
			m.Pix[i] = 0
		}
	}
	return m
}

// photo is a w×h photo of noise, as a camera stores it.
func photo(w, h int) *image.YCbCr {
	m := image.NewYCbCr(image.Rect(0, 0, w, h), image.YCbCrSubsampleRatio420)
	r := rand.NewChaCha8([32]byte{byte(w), byte(h)})
	for _, p := range [][]byte{m.Y, m.Cb, m.Cr} {
		_, _ = r.Read(p)
	}
	return m
}

func encoded(t testing.TB, enc func(*bytes.Buffer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := enc(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// images are the images handed to the agent, as their bytes.
func images(t *testing.T, r *mcp.CallToolResult) (got []struct {
	mime string
	data []byte
}) {
	t.Helper()
	for _, c := range r.Content {
		var mime, data string
		switch c := c.(type) {
		case mcp.ImageContent:
			mime, data = c.MIMEType, c.Data
		case mcp.EmbeddedResource:
			b, ok := c.Resource.(mcp.BlobResourceContents)
			if !ok {
				continue
			}
			mime, data = b.MIMEType, b.Blob
		default:
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			t.Fatalf("%s not base64: %v", mime, err)
		}
		got = append(got, struct {
			mime string
			data []byte
		}{mime, raw})
	}
	return got
}

// fitFor checks that data, handed as mime, is a fit image of that type
// with w×h pixels, and returns it decoded.
func fitFor(t *testing.T, mime string, data []byte, wantMime string, w, h int) image.Image {
	t.Helper()
	if mime != wantMime {
		t.Fatalf("handed as %s, want %s", mime, wantMime)
	}
	m, format, err := image.Decode(bytes.NewReader(data))
	if err != nil || "image/"+format != mime {
		t.Fatalf("handed %s does not decode as it: %s, %v", mime, format, err)
	}
	if b := m.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Errorf("handed %d×%d, want %d×%d", b.Dx(), b.Dy(), w, h)
	}
	if len(data) > fitBytes || len(base64.StdEncoding.EncodeToString(data)) >= 5<<20 {
		t.Errorf("handed %d bytes, more than %d", len(data), fitBytes)
	}
	return m
}

// TestAnswerPhotoFitForModel: a phone's photo as the existing
// agentassistant's Flutter app sends it, as a file, 4000×3000 and over
// 3.75 MB (5 MB of base64, which a model's API refuses, failing the
// agent's every turn that holds it), reaches the agent as a JPEG at most
// 1568 pixels on its long side and 3.75 MB long; and upright: taken
// upright, it is stored as the sensor read it, on its side, with an
// EXIF orientation saying to turn it (6, a quarter turn clockwise),
// which a browser follows and drawing it again drops.
func TestAnswerPhotoFitForModel(t *testing.T) {
	stored := photo(4000, 3000)
	for y := range 3000 { // what is seen at the top: white
		for x := range 1000 {
			stored.Y[stored.YOffset(x, y)], stored.Cb[stored.COffset(x, y)], stored.Cr[stored.COffset(x, y)] = 0xff, 0x80, 0x80
		}
	}
	data := oriented(encoded(t, func(b *bytes.Buffer) error { return jpeg.Encode(b, stored, &jpeg.Options{Quality: 90}) }), 6)
	if len(data) <= fitBytes {
		t.Fatalf("the photo is %d bytes, want more than %d", len(data), fitBytes)
	}
	got := images(t, answered(t, fileAnswer("IMG_0001.jpg", "image/jpeg", data)))
	if len(got) != 1 {
		t.Fatalf("the agent got %d images, want 1", len(got))
	}
	m := fitFor(t, got[0].mime, got[0].data, "image/jpeg", 1176, 1568)
	if r, _, _, _ := m.At(588, 100).RGBA(); r>>8 < 0xf0 {
		t.Errorf("the photo's top is %x, want white: it is not upright", r>>8)
	}
}

// oriented is a JPEG with an EXIF orientation o, as a camera writes it.
func oriented(jpg []byte, o uint16) []byte {
	tiff := []byte("MM\x00\x2a\x00\x00\x00\x08\x00\x01\x01\x12\x00\x03\x00\x00\x00\x01")
	tiff = binary.BigEndian.AppendUint16(tiff, o)
	tiff = append(tiff, 0, 0, 0, 0, 0, 0)
	app1 := binary.BigEndian.AppendUint16([]byte{0xff, 0xd8, 0xff, 0xe1}, uint16(2+6+len(tiff)))
	app1 = append(append(app1, "Exif\x00\x00"...), tiff...)
	return append(app1, jpg[2:]...)
}

// TestAnswerScreenshotFitAsPNG: a screenshot of a large screen, a PNG
// 2560 pixels wide, reaches the agent as a PNG 1568 pixels wide, its
// lines kept sharp rather than a JPEG's blur.
func TestAnswerScreenshotFitAsPNG(t *testing.T) {
	shot := image.NewNRGBA(image.Rect(0, 0, 2560, 1440))
	dark, light := []byte{0x20, 0x40, 0x80, 0xff}, []byte{0xf5, 0xf5, 0xf5, 0xff}
	for y := range 1440 {
		row := shot.Pix[y*shot.Stride : (y+1)*shot.Stride]
		for x := range 2560 {
			c := light
			if y < 120 || x < 600 || (y/40%2 == 0 && x%7 < 4) {
				c = dark
			}
			copy(row[4*x:], c)
		}
	}
	data := encoded(t, func(b *bytes.Buffer) error { return png.Encode(b, shot) })
	got := images(t, answered(t, imageAnswer("image/png", data)))
	if len(got) != 1 {
		t.Fatalf("the agent got %d images, want 1", len(got))
	}
	fitFor(t, got[0].mime, got[0].data, "image/png", 1568, 882)
}

// TestAnswerSeeThroughFitAsJPEG: a PNG with see-through parts that is
// too long as a PNG (small enough, 5.7 MB long) goes as a JPEG, its
// see-through parts white, as on a page (not black).
func TestAnswerSeeThroughFitAsJPEG(t *testing.T) {
	src := noise(1200, 1200, func(x, y int) bool { return x < 600 && y < 600 })
	data := encoded(t, func(b *bytes.Buffer) error { return png.Encode(b, src) })
	got := images(t, answered(t, imageAnswer("image/png", data)))
	if len(got) != 1 {
		t.Fatalf("the agent got %d images, want 1", len(got))
	}
	m := fitFor(t, got[0].mime, got[0].data, "image/jpeg", 1200, 1200)
	if r, g, b, _ := m.At(300, 300).RGBA(); r>>8 < 0xf0 || g>>8 < 0xf0 || b>>8 < 0xf0 {
		t.Errorf("a see-through part is %x %x %x, want white", r>>8, g>>8, b>>8)
	}
}

// TestAnswerFitImageKeptByteForByte: an image already fit, a small JPEG
// or GIF, reaches the agent byte for byte, not drawn again.
func TestAnswerFitImageKeptByteForByte(t *testing.T) {
	small := encoded(t, func(b *bytes.Buffer) error {
		return jpeg.Encode(b, noise(300, 200, nil), &jpeg.Options{Quality: 95})
	})
	pal := image.NewPaletted(image.Rect(0, 0, 1568, 10), []color.Color{color.Black, color.White})
	anim := encoded(t, func(b *bytes.Buffer) error {
		return gif.EncodeAll(b, &gif.GIF{Image: []*image.Paletted{pal, pal}, Delay: []int{10, 10}})
	})
	got := images(t, answered(t, imageAnswer("image/jpeg", small), imageAnswer("image/gif", anim), fileAnswer("a.jpg", "image/jpeg", small)))
	want := [][]byte{small, anim, small}
	if len(got) != len(want) {
		t.Fatalf("the agent got %d images, want %d", len(got), len(want))
	}
	for i, g := range got {
		if !bytes.Equal(g.data, want[i]) {
			t.Errorf("image %d (%s) was drawn again", i, g.mime)
		}
	}
}

// bombPNG is a PNG header declaring a w×h image, with no pixels.
func bombPNG(w, h uint32) []byte {
	ihdr := binary.BigEndian.AppendUint32([]byte("IHDR"), w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 6, 0, 0, 0)
	b := binary.BigEndian.AppendUint32([]byte("\x89PNG\r\n\x1a\n"), uint32(len(ihdr)-4))
	b = append(b, ihdr...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(ihdr))
}

// TestAnswerImageBombRefused: an image whose header declares more than
// 50 megapixels (a few bytes can declare gigabytes of pixels) is not
// decoded: the agent is told, in words, why it is left out.
func TestAnswerImageBombRefused(t *testing.T) {
	r := answered(t, imageAnswer("image/png", bombPNG(100_000, 100_000)), fileAnswer("b.png", "image/png", bombPNG(10_000, 6_000)))
	for _, g := range images(t, r) {
		if g.mime != "application/octet-stream" {
			t.Errorf("the agent was handed the bomb as %s", g.mime)
		}
	}
	if said := text(r); !strings.Contains(said, "100000×100000 pixels, more than the 50 megapixels") {
		t.Errorf("the agent was told %q", said)
	}
}

// FuzzFit: no bytes make fitting panic; what it hands on decodes, as
// the type it names, within the limits.
func FuzzFit(f *testing.F) {
	small := noise(40, 30, func(x, y int) bool { return x < 5 })
	pal := image.NewPaletted(image.Rect(0, 0, 20, 20), []color.Color{color.Black, color.White})
	for _, whole := range [][]byte{
		encoded(f, func(b *bytes.Buffer) error { return png.Encode(b, small) }),
		encoded(f, func(b *bytes.Buffer) error { return jpeg.Encode(b, small, nil) }),
		oriented(encoded(f, func(b *bytes.Buffer) error { return jpeg.Encode(b, noise(1600, 8, nil), nil) }), 8),
		encoded(f, func(b *bytes.Buffer) error { return gif.Encode(b, pal, nil) }),
		bombPNG(1600, 1600),
	} {
		for _, n := range []int{len(whole), len(whole) * 3 / 4, len(whole) / 2, 40, 16} {
			f.Add(whole[:min(n, len(whole))])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, mime, err := fit(data, readAs(data))
		if err != nil || out == nil {
			return
		}
		m, format, err := image.Decode(bytes.NewReader(out))
		if err != nil || "image/"+format != mime || max(m.Bounds().Dx(), m.Bounds().Dy()) > fitEdge || len(out) > fitBytes {
			t.Errorf("handed %s (%d bytes) that is %s, %v", mime, len(out), format, err)
		}
	})
}

// deepPNG is a w×h PNG of RGBA, all black, of depth bits a channel (8
// or 16), written row by row: small on disk, w*h*depth/2 bytes once
// decoded.
func deepPNG(t testing.TB, w, h, depth int) []byte {
	t.Helper()
	row := make([]byte, 1+w*depth/2)
	return pngOf(t, w, h, depth, 0, func(zw io.Writer) error {
		for range h {
			if _, err := zw.Write(row); err != nil {
				return err
			}
		}
		return nil
	})
}

// pngOf is a w×h PNG of RGBA at depth bits a channel, interlaced as
// interlace says (0 none, 1 Adam7), whose rows rows writes before they
// are compressed.
func pngOf(t testing.TB, w, h, depth int, interlace byte, rows func(io.Writer) error) []byte {
	t.Helper()
	chunk := func(b []byte, typ string, data []byte) []byte {
		b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
		body := append([]byte(typ), data...)
		b = append(b, body...)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(body))
	}
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, byte(depth), 6, 0, 0, interlace)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	if err := rows(zw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	b := chunk([]byte("\x89PNG\r\n\x1a\n"), "IHDR", ihdr)
	b = chunk(b, "IDAT", z.Bytes())
	return chunk(b, "IEND", nil)
}

// TestFitDeepImageBounded: a 49-megapixel PNG of 16-bit colour is under
// the pixel cap but takes 8 bytes a pixel, 392 MB, once decoded. What
// fitting may allocate is bounded by what the header says the pixels
// take, not by their count alone: this one is refused, in words that say
// why, with next to nothing allocated.
func TestFitDeepImageBounded(t *testing.T) {
	data := deepPNG(t, 7000, 7000, 16)
	var out []byte
	var err error
	allocated := allocatedBy(func() { out, _, err = fit(data, "image/png") })
	t.Logf("fitting allocated %.1f MB", float64(allocated)/1e6)
	if err == nil {
		t.Fatalf("a 49-megapixel 16-bit PNG was fit (%d bytes)", len(out))
	}
	if !strings.Contains(err.Error(), "7000×7000 pixels of 8 bytes each") {
		t.Errorf("the agent is told %q", err)
	}
	if allocated > maxDecodeBytes/4 {
		t.Errorf("fitting allocated %d bytes", allocated)
	}
}

// progressiveJPEG is a w×h grey progressive JPEG of three components at
// full resolution (4:4:4), in one DC scan: each 8×8 block of each
// component is the one-bit code of "no change". Go's decoder holds 64
// int32 coefficients for every block until the image is done.
func progressiveJPEG(w, h int) []byte {
	seg := func(b []byte, marker byte, body ...byte) []byte {
		b = append(b, 0xff, marker)
		b = binary.BigEndian.AppendUint16(b, uint16(2+len(body)))
		return append(b, body...)
	}
	b := []byte{0xff, 0xd8}
	b = seg(b, 0xdb, append([]byte{0}, bytes.Repeat([]byte{1}, 64)...)...)
	sof := binary.BigEndian.AppendUint16([]byte{8}, uint16(h))
	sof = binary.BigEndian.AppendUint16(sof, uint16(w))
	b = seg(b, 0xc2, append(sof, 3, 1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0)...)
	b = seg(b, 0xc4, append([]byte{0x00, 1}, make([]byte, 15+1)...)...)
	b = seg(b, 0xda, 3, 1, 0, 2, 0, 3, 0, 0, 0, 0)
	blocks := ((w + 7) / 8) * ((h + 7) / 8) * 3
	b = append(b, make([]byte, (blocks+7)/8)...)
	return append(b, 0xff, 0xd9)
}

// TestFitProgressiveJPEGBounded: a progressive JPEG of 36 megapixels,
// under the pixel cap, takes Go's decoder 3 bytes a pixel for its planes
// and 12 more for its coefficients: 540 MB. It is refused unread.
func TestFitProgressiveJPEGBounded(t *testing.T) {
	data := progressiveJPEG(6000, 6000)
	if m, err := jpeg.Decode(bytes.NewReader(progressiveJPEG(64, 48))); err != nil || m.Bounds().Dx() != 64 {
		t.Fatalf("the small one does not decode: %v", err)
	}
	var err error
	allocated := allocatedBy(func() { _, _, err = fit(data, "image/jpeg") })
	t.Logf("fitting allocated %.1f MB", float64(allocated)/1e6)
	if err == nil || !strings.Contains(err.Error(), "6000×6000 pixels of 15 bytes each") {
		t.Errorf("the agent is told %v", err)
	}
	if allocated > maxDecodeBytes/4 {
		t.Errorf("fitting allocated %d bytes", allocated)
	}
}

// TestFitScalingBounded: drawing a 7000×7000 image (8-bit RGBA, 196 MB
// decoded, under every bound) 1568 pixels wide takes little besides the
// decoded image and the one drawn: a two-pass scaler would hold a float
// for each channel of each drawn column of every source row, 32 bytes ×
// 1568 × 7000, 351 MB.
func TestFitScalingBounded(t *testing.T) {
	data := deepPNG(t, 7000, 7000, 8)
	var out []byte
	var mime string
	var err error
	allocated := allocatedBy(func() { out, mime, err = fit(data, "image/png") })
	if err != nil {
		t.Fatal(err)
	}
	besides := int64(allocated) - 7000*7000*4
	t.Logf("fitting allocated %.1f MB besides the decoded image", float64(besides)/1e6)
	if m, _, err := image.Decode(bytes.NewReader(out)); err != nil || mime != "image/png" || m.Bounds().Dx() != fitEdge {
		t.Errorf("handed %s, %v", mime, err)
	}
	if besides > 64<<20 {
		t.Errorf("fitting allocated %d bytes besides the decoded image", besides)
	}
}

// TestShrinkAverages: a pixel drawn smaller is the average of the area
// it covers, parts of pixels by their share, and a see-through pixel
// lends it no colour.
func TestShrinkAverages(t *testing.T) {
	src := image.NewNRGBA(image.Rect(10, 20, 13, 21)) // 3×1: red, blue, see-through green
	copy(src.Pix, []byte{255, 0, 0, 255, 0, 0, 255, 255, 0, 255, 0, 0})
	dst := image.NewNRGBA(image.Rect(0, 0, 2, 1))
	shrink(dst, src)
	// Each covers a pixel and a half. The left is red and half of
	// blue; the right, half of blue and the see-through green: blue, at
	// a third of its opacity.
	want := []byte{170, 0, 85, 255, 0, 0, 255, 85}
	if !bytes.Equal(dst.Pix, want) {
		t.Errorf("drawn %v, want %v", dst.Pix, want)
	}
}

// allocatedBy is what f allocates, freed or not.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// interlacedPNG is a w×h PNG of 8-bit RGBA, Adam7-interlaced: its
// seven passes, each a smaller image of zero rows.
func interlacedPNG(t testing.TB, w, h int) []byte {
	t.Helper()
	return pngOf(t, w, h, 8, 1, func(zw io.Writer) error {
		for _, p := range [7][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
			pw, ph := (w-p[0]+p[2]-1)/p[2], (h-p[1]+p[3]-1)/p[3]
			if pw <= 0 || ph <= 0 {
				continue
			}
			row := make([]byte, 1+4*pw)
			for range ph {
				if _, err := zw.Write(row); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// TestFitInterlacedPNGBounded: an interlaced PNG is decoded a pass at a
// time, each pass an image of its own merged into the whole, so that a
// 7000×7000 one of 8-bit RGBA, 196 MB as the header's pixels count,
// takes twice that. What fitting allocates stays within maxDecodeBytes
// and a little for the image drawn: this one is refused unread, in words
// that say why.
func TestFitInterlacedPNGBounded(t *testing.T) {
	if m, err := png.Decode(bytes.NewReader(interlacedPNG(t, 13, 11))); err != nil || m.Bounds().Dx() != 13 {
		t.Fatalf("the small one does not decode: %v", err)
	}
	data := interlacedPNG(t, 7000, 7000)
	var err error
	allocated := allocatedBy(func() { _, _, err = fit(data, "image/png") })
	t.Logf("fitting allocated %.1f MB", float64(allocated)/1e6)
	if allocated > maxDecodeBytes+64<<20 {
		t.Errorf("fitting allocated %d bytes, past the %d bound", allocated, maxDecodeBytes)
	}
	if err == nil || !strings.Contains(err.Error(), "7000×7000 pixels of 8 bytes each") {
		t.Errorf("the agent is told %v", err)
	}
}
