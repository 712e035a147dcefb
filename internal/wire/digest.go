package wire

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"strconv"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// Digest identifies a request's content: its kind, project directory and
// text. A caller re-attaching to a request by its ID names the digest
// too, so another request that reuses the ID is told apart; a caller
// that does not keep the text (a call resumed through another instance
// of a cluster) carries the digest instead.
func Digest(kind Kind, dir, text string) [sha256.Size]byte {
	h := sha256.New()
	writeFields(h, kind.String(), dir, text)
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// Shown identifies what a person reads of a request when answering it
// with one tap: Digest's fields, and its questions as its notification
// or message shows them (each one's text and header, how many options
// may be chosen, whether a typed answer is taken, its options' labels
// and descriptions). A capability carries it, so that a tap made reading
// one question answers no other asked since under its ID, however
// little they differ.
func Shown(kind Kind, dir, text string, qs []*pb.Question) [sha256.Size]byte {
	h := sha256.New()
	writeFields(h, kind.String(), dir, text, "shown", strconv.Itoa(len(qs)))
	for _, q := range qs {
		writeFields(h, q.GetQuestion(), q.GetHeader(), strconv.FormatBool(q.GetMultiple()), strconv.FormatBool(q.GetCustom()),
			strconv.Itoa(len(q.GetOptions())))
		for _, o := range q.GetOptions() {
			writeFields(h, o.GetLabel(), o.GetDescription())
		}
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// writeFields writes each field after its length, so that no two lists
// of fields hash alike.
func writeFields(h hash.Hash, fields ...string) {
	var n [8]byte
	for _, f := range fields {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
}
