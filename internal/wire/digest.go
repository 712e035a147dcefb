package wire

import (
	"crypto/sha256"
	"encoding/binary"
)

// Digest identifies a request's content: its kind, project directory and
// text. A caller re-attaching to a request by its ID names the digest
// too, so another request that reuses the ID is told apart; a caller
// that does not keep the text (a call resumed through another instance
// of a cluster) carries the digest instead.
func Digest(kind Kind, dir, text string) [sha256.Size]byte {
	h := sha256.New()
	var n [8]byte
	for _, f := range []string{kind.String(), dir, text} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}
