package mcpbridge

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"sync"

	"golang.org/x/image/draw"
	"golang.org/x/image/math/f64"

	// The decoders of readImages: GIF, JPEG and PNG are the standard
	// library's, WebP is golang.org/x/image's.
	_ "image/gif"

	_ "golang.org/x/image/webp"
)

// An answer's image made fit for the agent's model, as the web app makes
// what a person attaches (web/src/inbox/fitimage.ts): at most fitEdge
// pixels on its long side and fitBytes long (a model's API refuses an
// image of 5 MB or more of base64). Any client's image passes here: the
// existing agentassistant's Flutter app sends a phone's photo as it is
// (4,000 pixels, 6 MB), so one too large is drawn again, smaller: a
// photo (JPEG, WebP) as a JPEG, any other as a PNG while that fits (a
// JPEG then, its see-through parts white), a JPEG turned upright as its
// EXIF orientation says. One already fit is kept byte for byte.
const (
	fitEdge  = 1568
	fitBytes = 3_750_000
	// maxPixels bounds what is decoded at all, read from the header
	// first: a few bytes can declare an image of gigabytes.
	maxPixels = 50_000_000
	// maxDecodeBytes bounds the memory one decoded image takes, also read
	// from the header: its pixels times the bytes each takes in its
	// colour model (a PNG of 16-bit colour takes 8, a JPEG photo 1.5).
	// It lets the pixel cap through in 8-bit RGBA, a phone's largest
	// photo many times over.
	maxDecodeBytes = maxPixels * 4
)

// fitting lets one image be decoded at a time: the memory an answer's
// images take is that of the largest, however many arrive together.
var fitting sync.Mutex

// errNotRead is an image none of readImages decodes.
var errNotRead = errors.New("it could not be read as a PNG, JPEG, GIF or WebP image")

// fit is data, an image of type mime (one of readImages, "" when none),
// fit for a model: nil when data is as it is, else data drawn again and
// its type; or an error that says why it cannot be.
func fit(data []byte, mime string) ([]byte, string, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if mime == "" || err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, "", errNotRead
	}
	if int64(cfg.Width)*int64(cfg.Height) > maxPixels {
		return nil, "", fmt.Errorf("it is %d×%d pixels, more than the %d megapixels read", cfg.Width, cfg.Height, maxPixels/1_000_000)
	}
	if max(cfg.Width, cfg.Height) <= fitEdge && len(data) <= fitBytes {
		return nil, mime, nil
	}
	if per := bytesPerPixel(cfg.ColorModel, format, data); float64(cfg.Width)*float64(cfg.Height)*per > maxDecodeBytes {
		return nil, "", fmt.Errorf("it is %d×%d pixels of %.3g bytes each once decoded, %d MB, more than the %d MB read",
			cfg.Width, cfg.Height, per, int64(float64(cfg.Width)*float64(cfg.Height)*per/1e6), maxDecodeBytes/1_000_000)
	}
	fitting.Lock()
	defer fitting.Unlock()
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, "", errNotRead
	}
	sb := src.Bounds()
	scale := min(1, float64(fitEdge)/float64(max(sb.Dx(), sb.Dy())))
	w, h := max(1, int(float64(sb.Dx())*scale+0.5)), max(1, int(float64(sb.Dy())*scale+0.5))
	dst := image.NewNRGBA(image.Rect(0, 0, w, h))
	shrink(dst, src)
	if mime == "image/jpeg" {
		dst = upright(dst, orientation(data))
	}
	var out bytes.Buffer
	if (mime != "image/jpeg" && mime != "image/webp") || !dst.Opaque() {
		if err := png.Encode(&out, dst); err == nil && out.Len() <= fitBytes {
			return out.Bytes(), "image/png", nil
		}
	}
	// A JPEG has no see-through parts: they go white, as on a page.
	flat := image.NewRGBA(dst.Bounds())
	draw.Draw(flat, flat.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	draw.Draw(flat, flat.Bounds(), dst, image.Point{}, draw.Over)
	for _, q := range []int{85, 70, 50} {
		out.Reset()
		if err := jpeg.Encode(&out, flat, &jpeg.Options{Quality: q}); err == nil && out.Len() <= fitBytes {
			return out.Bytes(), "image/jpeg", nil
		}
	}
	return nil, "", fmt.Errorf("it is larger than %.2f MB even as a JPEG %d pixels on its long side", float64(fitBytes)/1e6, max(w, h))
}

// bytesPerPixel is what decoding an image of colour model m (format as
// image.DecodeConfig names it, data its bytes) takes a pixel at most: its
// pixels in that model and, for a JPEG or an interlaced PNG, what the
// decoder holds besides.
func bytesPerPixel(m color.Model, format string, data []byte) float64 {
	if format == "jpeg" {
		return jpegBytesPerPixel(data)
	}
	if format == "png" && pngInterlaced(data) {
		// Go's decoder draws each of Adam7's seven passes as an image of
		// its own and merges it into the whole: the passes add up to
		// the whole once more.
		return 2 * modelBytesPerPixel(m)
	}
	return modelBytesPerPixel(m)
}

// pngInterlaced says the PNG data's header (IHDR, the first chunk) names
// Adam7 interlacing.
func pngInterlaced(data []byte) bool {
	return len(data) > 28 && string(data[12:16]) == "IHDR" && data[28] == 1
}

// modelBytesPerPixel is what a pixel of colour model m takes.
func modelBytesPerPixel(m color.Model) float64 {
	if _, ok := m.(color.Palette); ok {
		return 1
	}
	switch m {
	case color.GrayModel, color.AlphaModel:
		return 1
	case color.Gray16Model, color.Alpha16Model:
		return 2
	case color.YCbCrModel: // lossy WebP: chroma at a quarter
		return 1.5
	case color.NYCbCrAModel:
		return 2.5
	case color.RGBAModel, color.NRGBAModel, color.CMYKModel:
		return 4
	}
	return 8 // RGBA64, NRGBA64, or one not known: the most any takes
}

// jpegBytesPerPixel is what Go's JPEG decoder takes a pixel for data: a
// plane per component at its sampling (1.5 bytes for a 4:2:0 photo), a
// CMYK copy for four components, and, for a progressive JPEG, 64 int32
// coefficients per 8×8 block of every component until its last scan.
// Without a frame header it is the most these add to.
func jpegBytesPerPixel(data []byte) float64 {
	for p := 2; p+4 <= len(data) && data[p] == 0xff; {
		marker, n := data[p+1], int(binary.BigEndian.Uint16(data[p+2:]))
		if marker == 0xda || n < 2 || p+2+n > len(data) {
			break
		}
		if seg := data[p+4 : p+2+n]; (marker == 0xc0 || marker == 0xc1 || marker == 0xc2) && len(seg) >= 6 {
			nc := int(seg[5])
			if nc < 1 || len(seg) < 6+3*nc {
				break
			}
			var hmax, vmax int
			for i := range nc {
				hv := seg[6+3*i+1]
				hmax, vmax = max(hmax, int(hv>>4), 1), max(vmax, int(hv&15), 1)
			}
			planes := 0.0
			for i := range nc {
				hv := seg[6+3*i+1]
				planes += float64(max(int(hv>>4), 1)*max(int(hv&15), 1)) / float64(hmax*vmax)
			}
			per := planes
			if nc == 4 {
				per += 4
			}
			if marker == 0xc2 {
				per += 4 * planes
			}
			return per
		}
		p += 2 + n
	}
	return 4 + 4 + 4*4 // four full planes, a CMYK copy, their coefficients
}

// upright is m turned as its EXIF orientation o (1 to 8) says it is
// seen, as a browser draws it: a phone stores a photo as its sensor read
// it and says how to turn it, in a tag drawing it again drops.
func upright(m *image.NRGBA, o int) *image.NRGBA {
	if o < 2 || o > 8 {
		return m
	}
	w, h := float64(m.Rect.Dx()), float64(m.Rect.Dy())
	// Where a stored point is seen.
	s2d := [...]f64.Aff3{
		2: {-1, 0, w, 0, 1, 0},
		3: {-1, 0, w, 0, -1, h},
		4: {1, 0, 0, 0, -1, h},
		5: {0, 1, 0, 1, 0, 0},
		6: {0, -1, h, 1, 0, 0},
		7: {0, -1, h, -1, 0, w},
		8: {0, 1, 0, -1, 0, w},
	}[o]
	r := m.Rect
	if o >= 5 {
		r = image.Rect(0, 0, r.Dy(), r.Dx())
	}
	out := image.NewNRGBA(r)
	draw.NearestNeighbor.Transform(out, s2d, m, m.Rect, draw.Src, nil)
	return out
}

// orientation is a JPEG's EXIF orientation (IFD0's tag 0x0112), 1 (as
// stored) when it has none.
func orientation(data []byte) int {
	if !bytes.HasPrefix(data, []byte{0xff, 0xd8}) {
		return 1
	}
	for p := 2; p+4 <= len(data) && data[p] == 0xff; {
		marker, n := data[p+1], int(binary.BigEndian.Uint16(data[p+2:]))
		if marker == 0xda || n < 2 || p+2+n > len(data) { // image data
			break
		}
		if seg := data[p+4 : p+2+n]; marker == 0xe1 && bytes.HasPrefix(seg, []byte("Exif\x00\x00")) {
			return exifOrientation(seg[6:])
		}
		p += 2 + n
	}
	return 1
}

func exifOrientation(t []byte) int {
	var bo binary.ByteOrder = binary.BigEndian
	switch {
	case len(t) < 8:
		return 1
	case string(t[:2]) == "II":
		bo = binary.LittleEndian
	case string(t[:2]) != "MM":
		return 1
	}
	ifd := int64(bo.Uint32(t[4:]))
	if ifd+2 > int64(len(t)) {
		return 1
	}
	for i, e := 0, int(ifd)+2; i < int(bo.Uint16(t[ifd:])) && e+12 <= len(t); i, e = i+1, e+12 {
		if bo.Uint16(t[e:]) == 0x0112 {
			return int(bo.Uint16(t[e+8:]))
		}
	}
	return 1
}
