package wsconn

import (
	"encoding/binary"
	"unicode/utf8"
)

// Opcodes (RFC 6455 5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// Close codes (RFC 6455 7.4.1) the reader answers with.
const (
	closeProtocolError  = 1002
	closeInvalidPayload = 1007
	closeTooBig         = 1009
	closeNoStatus       = 1005 // never sent: a close frame without a code
)

// frame is one client frame, its payload unmasked in place.
type frame struct {
	fin     bool
	op      byte
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

// parseFrame takes one client frame from the front of b. It returns the
// frame and how many bytes it took; or n == 0 and need, the length b must
// reach for the frame to be complete (a lower bound while the header is
// short); or an error for a frame no client may send. Frames of more
// than limit payload bytes are refused from their header alone, before
// any of the payload is buffered.
func parseFrame(b []byte, limit int64) (f frame, n, need int, err error) {
	if len(b) < 2 {
		return f, 0, 2, nil
	}
	b0, b1 := b[0], b[1]
	if b0&0x70 != 0 {
		return f, 0, 0, protoErr(closeProtocolError, "reserved bits set without an extension")
	}
	f.fin, f.op = b0&0x80 != 0, b0&0x0f
	switch f.op {
	case opContinuation, opText, opBinary, opClose, opPing, opPong:
	default:
		return f, 0, 0, protoErr(closeProtocolError, "unknown opcode")
	}
	if b1&0x80 == 0 {
		return f, 0, 0, protoErr(closeProtocolError, "client frames must be masked")
	}
	head := 2
	size := uint64(b1 & 0x7f)
	switch size {
	case 126:
		head += 2
	case 127:
		head += 8
	}
	if len(b) < head+4 {
		return f, 0, head + 4, nil
	}
	switch size {
	case 126:
		size = uint64(binary.BigEndian.Uint16(b[2:]))
	case 127:
		size = binary.BigEndian.Uint64(b[2:])
		if size>>63 != 0 {
			return f, 0, 0, protoErr(closeProtocolError, "frame length out of range")
		}
	}
	if f.op >= opClose && (!f.fin || size > 125) {
		return f, 0, 0, protoErr(closeProtocolError, "control frames must be whole and at most 125 bytes")
	}
	if limit >= 0 && size > uint64(limit) {
		return f, 0, 0, protoErr(closeTooBig, "message too big")
	}
	key := b[head : head+4]
	total := head + 4 + int(size)
	if len(b) < total {
		return f, 0, total, nil
	}
	f.payload = b[head+4 : total]
	unmask(key, f.payload)
	return f, total, 0, nil
}

// unmask XORs p with the 4-byte key, starting at key offset 0.
func unmask(key, p []byte) {
	k := uint64(binary.LittleEndian.Uint32(key))
	k |= k << 32
	for len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, binary.LittleEndian.Uint64(p)^k)
		p = p[8:]
	}
	for i := range p {
		p[i] ^= key[i&3]
	}
}

// closePayload checks a close frame's payload (RFC 6455 5.5.1, 7.4) and
// returns the code to echo.
func closePayload(p []byte) (int, error) {
	switch {
	case len(p) == 0:
		return closeNoStatus, nil
	case len(p) == 1:
		return 0, protoErr(closeProtocolError, "close frame with a one-byte payload")
	}
	code := int(binary.BigEndian.Uint16(p))
	if !validCloseCode(code) {
		return 0, protoErr(closeProtocolError, "invalid close code")
	}
	if !utf8.Valid(p[2:]) {
		return 0, protoErr(closeInvalidPayload, "close reason is not UTF-8")
	}
	return code, nil
}

func validCloseCode(code int) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1011:
		return true
	case code >= 3000 && code <= 4999:
		return true
	}
	return false
}
