package main

import (
	"bytes"
	"io"
)

// maxLine bounds a line the MCP client writes on stdin: one JSON-RPC
// message. The server takes a message of 16 MiB at most; twice that
// leaves room for JSON's escapes. mcp-go reads a line whole, then copies
// it twice more, so a client gone wrong could otherwise make this
// process hold four times whatever it writes without a newline.
const maxLine = 32 << 20

// lineBound passes the lines of r on, each cut at max bytes: past them
// the line ends there (the reader of the lines finds no JSON in it and
// answers a parse error, id null, as JSON-RPC says) and the rest of it,
// up to its newline, is dropped. too is told each time a line is cut.
type lineBound struct {
	r        io.Reader
	max      int
	n        int  // bytes of the current line passed on
	dropping bool // in the rest of a line that was cut
	too      func()
}

func (b *lineBound) Read(p []byte) (int, error) {
	for {
		k, err := b.r.Read(p)
		out := b.filter(p[:k])
		if out > 0 || err != nil || len(p) == 0 {
			return out, err
		}
		// All of it was the rest of a line that was cut: read on rather
		// than return nothing with no error.
	}
}

// filter rewrites buf in place and returns how many of its bytes to pass.
func (b *lineBound) filter(buf []byte) int {
	out := 0
	for pos := 0; pos < len(buf); {
		seg := buf[pos:] // up to and with the next newline, or the rest
		nl := bytes.IndexByte(seg, '\n')
		body := len(seg)
		if nl >= 0 {
			seg, body = seg[:nl+1], nl
		}
		pos += len(seg)
		switch {
		case b.dropping:
			b.dropping = nl < 0
		case b.n+body <= b.max:
			out += copy(buf[out:], seg)
			b.n += body
			if nl >= 0 {
				b.n = 0
			}
		default:
			// Too long: pass what fits, end the line, drop the rest. The
			// newline goes where the line's dropped bytes were.
			out += copy(buf[out:], seg[:b.max-b.n])
			buf[out] = '\n'
			out++
			b.n = 0
			b.dropping = nl < 0
			if b.too != nil {
				b.too()
			}
		}
	}
	return out
}
