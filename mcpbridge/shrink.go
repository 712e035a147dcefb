package mcpbridge

import (
	"image"

	"golang.org/x/image/draw"
)

// shrink draws src into dst, no larger, each pixel of dst the average
// of the area of src it covers (a box filter, as a browser's canvas
// draws a photo smaller), in premultiplied colour so that see-through
// pixels lend no colour. It reads src a row at a time and holds two
// rows of sums besides: x/image/draw's kernels hold a float for each
// channel of each column of dst for every row of src (32 bytes ×
// 1568 × 7000, 351 MB, for a 49-megapixel square), more than the image.
//
// Lengths are counted in units that make every edge an integer: a
// pixel of src is dw units wide and dh high, one of dst sw wide and sh
// high, so a src pixel, no larger than a dst one, falls in at most two
// of its columns and two of its rows, and each dst pixel sums to
// sw*sh units of area.
func shrink(dst *image.NRGBA, src image.Image) {
	sb := src.Bounds()
	sw, sh := sb.Dx(), sb.Dy()
	dw, dh := dst.Rect.Dx(), dst.Rect.Dy()
	if sw <= 0 || sh <= 0 || dw <= 0 || dh <= 0 || dw > sw || dh > sh {
		return
	}
	row := image.NewRGBA(image.Rect(0, 0, sw, 1))
	across := make([]int64, 4*dw) // one src row, summed into dst's columns
	acc := make([]int64, 4*dw)    // the dst row being summed
	area := int64(sw) * int64(sh)
	flush := func(y int) {
		out := dst.Pix[y*dst.Stride:]
		for x := range dw {
			a := acc[4*x+3]
			if a == 0 {
				copy(out[4*x:4*x+4], []byte{0, 0, 0, 0})
				continue
			}
			for c := range 3 {
				out[4*x+c] = byte(min(255, (acc[4*x+c]*255+a/2)/a)) //nolint:gosec // G115: at most 255
			}
			out[4*x+3] = byte(min(255, (a+area/2)/area)) //nolint:gosec // G115: at most 255
		}
		clear(acc)
	}
	add := func(w int64) {
		for i, v := range across {
			acc[i] += w * v
		}
	}
	for y := range sh {
		draw.Draw(row, row.Rect, src, image.Pt(sb.Min.X, sb.Min.Y+y), draw.Src)
		clear(across)
		for x := range sw {
			p := row.Pix[4*x : 4*x+4]
			X, w0, w1 := split(x, sw, dw)
			for c := range 4 {
				across[4*X+c] += w0 * int64(p[c])
				if w1 > 0 {
					across[4*(X+1)+c] += w1 * int64(p[c])
				}
			}
		}
		Y, w0, w1 := split(y, sh, dh)
		add(w0)
		if w1 > 0 || (int64(y)+1)*int64(dh)%int64(sh) == 0 {
			flush(Y)
			add(w1)
		}
	}
}

// split is where pixel i of n falls among m (m <= n): in pixel j, w0
// units of its m, and w1 more in pixel j+1 (0 when it ends in j). Int64
// throughout: i*m passes 2^31 for a wide image.
func split(i, n, m int) (j int, w0, w1 int64) {
	s, n64, m64 := int64(i)*int64(m), int64(n), int64(m)
	j64 := s / n64
	edge := (j64 + 1) * n64
	if s+m64 <= edge {
		return int(j64), m64, 0
	}
	return int(j64), edge - s, s + m64 - edge
}
