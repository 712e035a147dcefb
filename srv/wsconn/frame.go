package wsconn

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/gobwas/ws"
)

// The framing (RFC 6455 5.2) is gobwas/ws's: its header reader, checks,
// cipher and close-frame codec. What is ours is where the bytes come from
// (a buffer filled as they arrive, so a connection can be parked between
// frames) and the limits.

// Close codes (RFC 6455 7.4.1) the endpoints end connections with.
const (
	CloseNormal          = int(ws.StatusNormalClosure)
	CloseGoingAway       = int(ws.StatusGoingAway)
	CloseProtocolError   = int(ws.StatusProtocolError)
	CloseInvalidPayload  = int(ws.StatusInvalidFramePayloadData)
	ClosePolicyViolation = int(ws.StatusPolicyViolation)
	CloseTooBig          = int(ws.StatusMessageTooBig)
	CloseTryAgainLater   = 1013                       // RFC 6455 registry: the server is overloaded
	closeNoStatus        = int(ws.StatusNoStatusRcvd) // never sent: a close frame without a code
)

// frame is one client frame, its payload unmasked in place.
type frame struct {
	fin     bool
	op      ws.OpCode
	payload []byte
}

// ProtocolError is a frame the peer may not send; the connection ends with
// Code.
type ProtocolError struct {
	Code int
	Msg  string
}

func (e *ProtocolError) Error() string { return "websocket: " + e.Msg }

func protoErr(code int, msg string) *ProtocolError { return &ProtocolError{Code: code, Msg: msg} }

// parser reads client frames from a buffer with gobwas/ws; its fields are
// scratch space, so parsing allocates nothing.
type parser struct {
	rd  bytes.Reader
	hdr [ws.MaxHeaderSize - 2]byte
}

// parse takes one client frame from the front of b; fragmented tells
// whether a fragmented message is under way. It returns the frame and how
// many bytes it took; or n == 0 and need, a lower bound on the length b
// must reach for the frame to be complete; or an error for a frame no
// client may send. Frames of more than limit payload bytes are refused
// from their header alone, before any of the payload is buffered.
func (p *parser) parse(b []byte, limit int64, fragmented bool) (f frame, n, need int, err error) {
	p.rd.Reset(b)
	h, err := ws.ReadHeaderBuffer(&p.rd, p.hdr[:])
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return f, 0, len(b) + 1, nil // the header is not all here yet
	case err != nil:
		return f, 0, 0, protoErr(CloseProtocolError, err.Error())
	}
	state := ws.StateServerSide
	if fragmented {
		state = state.Set(ws.StateFragmented)
	}
	if err := ws.CheckHeader(h, state); err != nil {
		return f, 0, 0, protoErr(CloseProtocolError, err.Error())
	}
	if limit >= 0 && h.Length > limit {
		return f, 0, 0, protoErr(CloseTooBig, "message too big")
	}
	head := len(b) - p.rd.Len()
	if int64(p.rd.Len()) < h.Length {
		return f, 0, head + int(h.Length), nil
	}
	total := head + int(h.Length)
	f.fin, f.op, f.payload = h.Fin, h.OpCode, b[head:total]
	ws.Cipher(f.payload, h.Mask, 0)
	return f, total, 0, nil
}

// closePayload checks a close frame's payload (RFC 6455 5.5.1, 7.4) and
// returns the code to echo.
func closePayload(p []byte) (int, error) {
	switch len(p) {
	case 0:
		return closeNoStatus, nil
	case 1:
		return 0, protoErr(CloseProtocolError, "close frame with a one-byte payload")
	}
	code, reason := ws.ParseCloseFrameDataUnsafe(p)
	switch err := ws.CheckCloseFrameData(code, reason); {
	case errors.Is(err, ws.ErrProtocolInvalidUTF8):
		return 0, protoErr(CloseInvalidPayload, err.Error())
	case err != nil:
		return 0, protoErr(CloseProtocolError, err.Error())
	case code > 4999: // beyond the private range: no meaning anyone agreed on
		return 0, protoErr(CloseProtocolError, "close code out of range")
	}
	return int(code), nil
}

// frameBuf is one server frame, framed for a single write.
type frameBuf struct {
	b   []byte
	hdr [ws.MaxHeaderSize]byte
}

func (f *frameBuf) Write(p []byte) (int, error) { f.b = append(f.b, p...); return len(p), nil }

// framePool holds the buffers frames are built in; a buffer grown by a
// big frame (an image) is left to the collector rather than kept.
var framePool = sync.Pool{New: func() any { return new(frameBuf) }}

const maxPooledFrame = 64 << 10

// newFrame frames payload as one unmasked, unfragmented frame of opcode op
// (RFC 6455 5.2); putFrame gives the buffer back.
func newFrame(op ws.OpCode, payload []byte) *frameBuf {
	f := framePool.Get().(*frameBuf)
	f.b = f.b[:0]
	// Writing to a frameBuf cannot fail, and the length always fits.
	_ = ws.WriteHeaderBuffer(f, ws.Header{Fin: true, OpCode: op, Length: int64(len(payload))}, f.hdr[:])
	f.b = append(f.b, payload...)
	return f
}

func putFrame(f *frameBuf) {
	if cap(f.b) <= maxPooledFrame {
		framePool.Put(f)
	}
}
