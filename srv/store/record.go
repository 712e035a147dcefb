package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/agentassistant/agentassistant/gen/storeproto"
)

// A record is stored as a format byte followed by a storeproto.Record
// (proto/storeproto/record.proto): compact, cheap to encode, and unknown
// fields are skipped, so later versions can add fields. Stores written
// before this format hold JSON (first byte '{'); they are rewritten on Open.
//
// The last field is always a CRC-32C of everything before it (the
// message's sum, field fSum), so a record whose bytes were damaged on disk
// is found out instead of restored with a text nobody typed: the message
// is marshalled without it, then it is appended. Records of the second
// layout have none; Open rewrites them with one. Fields a later version
// adds go before it (numbers below 100).
const formatWire = 1

// fSum is storeproto.Record's sum field; sumTag is its tag as written, so
// a summed record ends with sumTag and the sum's 4 bytes.
const fSum protowire.Number = 100

var sumTag = protowire.AppendTag(nil, fSum, protowire.Fixed32Type)

var (
	// Deterministic: the same record is always the same bytes (there are
	// no maps to order today; this keeps it so). The size is taken first,
	// to size the buffer, and used again by the marshal.
	sizer     = proto.MarshalOptions{Deterministic: true}
	marshal   = proto.MarshalOptions{Deterministic: true, UseCachedSize: true}
	unmarshal = proto.UnmarshalOptions{DiscardUnknown: true}
	// messages are the codec's scratch messages, reused: a record is
	// encoded on every write and decoded on every read.
	messages = sync.Pool{New: func() any { return new(storeproto.Record) }}
)

func encode(r *Record) []byte {
	m := messages.Get().(*storeproto.Record)
	defer messages.Put(m)
	*m = storeproto.Record{
		Room: r.Room, Id: r.ID, Kind: int64(r.Kind), ProjectDirectory: r.ProjectDirectory, Text: r.Text,
		TimeoutSeconds: r.TimeoutSeconds, CreatedAt: nanos(r.CreatedAt), Deadline: nanos(r.Deadline),
		Status: r.Status, Reply: r.Reply, ClosedAt: nanos(r.ClosedAt), ClosedNote: r.ClosedNote,
		AgentName: r.AgentName, ReasoningModelName: r.ReasoningModelName, McpClientName: r.McpClientName,
		WithdrawOnLeave: r.WithdrawOnLeave, TaskFinishEra: r.TaskFinishEra, Questions: r.Questions, ReplyDoor: r.ReplyDoor,
	}
	b := make([]byte, 1, 1+sizer.Size(m)+len(sumTag)+4)
	b[0] = formatWire
	b, err := marshal.MarshalAppend(b, m)
	*m = storeproto.Record{} // hold no record's text in the pool
	if err != nil {
		// No required fields and no UTF-8 check: it cannot fail.
		panic(fmt.Sprintf("store: marshal record: %v", err))
	}
	sum := crc32.Checksum(b, castagnoli)
	return protowire.AppendFixed32(append(b, sumTag...), sum)
}

// nanos is t in Unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

var errDamaged = errors.New("damaged record")

// decode reads a record in either format. Strings and the reply are
// copied: v belongs to the database.
func decode(v []byte, r *Record) error {
	_, err := decodeSummed(v, r)
	return err
}

// decodeSummed is decode, and tells whether the record had its checksum.
func decodeSummed(v []byte, r *Record) (summed bool, err error) {
	if len(v) > 0 && v[0] == '{' {
		return false, json.Unmarshal(v, r)
	}
	if len(v) == 0 || v[0] != formatWire {
		return false, errDamaged
	}
	m := messages.Get().(*storeproto.Record)
	defer func() {
		*m = storeproto.Record{} // hold no record's text in the pool
		messages.Put(m)
	}()
	// A sound sum at the end, after whole fields and the only one.
	if n := len(v) - len(sumTag) - 4; n >= 1 && bytes.Equal(v[n:n+len(sumTag)], sumTag) &&
		crc32.Checksum(v[:n], castagnoli) == binary.LittleEndian.Uint32(v[len(v)-4:]) &&
		unmarshal.Unmarshal(v[1:n], m) == nil && m.Sum == nil {
		fromMessage(m, r)
		return true, nil
	}
	// Otherwise a record of the second layout, without one; a sum
	// anywhere is a damaged sum, a damaged record, or bytes after the end.
	if unmarshal.Unmarshal(v[1:], m) != nil || m.Sum != nil {
		return false, errDamaged
	}
	fromMessage(m, r)
	return false, nil
}

func fromMessage(m *storeproto.Record, r *Record) {
	at := func(x int64) time.Time {
		if x == 0 { // never written: it stands for no time
			return time.Time{}
		}
		return time.Unix(0, x)
	}
	*r = Record{
		Room: m.Room, ID: m.Id, Kind: int(m.Kind), ProjectDirectory: m.ProjectDirectory, Text: m.Text,
		TimeoutSeconds: m.TimeoutSeconds, CreatedAt: at(m.CreatedAt), Deadline: at(m.Deadline),
		Status: m.Status, Reply: m.Reply, ClosedAt: at(m.ClosedAt), ClosedNote: m.ClosedNote,
		AgentName: m.AgentName, ReasoningModelName: m.ReasoningModelName, McpClientName: m.McpClientName,
		WithdrawOnLeave: m.WithdrawOnLeave, TaskFinishEra: m.TaskFinishEra, Questions: m.Questions, ReplyDoor: m.ReplyDoor,
	}
}

// layoutKey, in the meta bucket, names the layout the records are in;
// a store without it may hold records of the earlier one.
var (
	meta      = []byte("meta")
	layoutKey = []byte("layout")
	layout    = []byte("3")
)

// upgrade rewrites the records of earlier layouts in the current one,
// once: JSON under room/id (the first), or without a checksum (the
// second), each becomes the wire format with its checksum under
// Record.Key. The store then says so in its meta bucket.
func upgrade(tx *bolt.Tx) (int, error) {
	m, err := tx.CreateBucketIfNotExists(meta)
	if err != nil {
		return 0, err
	}
	if bytes.Equal(m.Get(layoutKey), layout) {
		return 0, nil
	}
	b := tx.Bucket(requests)
	type move struct {
		old []byte
		r   Record
	}
	var moves []move
	err = b.ForEach(func(k, v []byte) error {
		var r Record
		if summed, err := decodeSummed(v, &r); err == nil && !summed {
			moves = append(moves, move{old: append([]byte(nil), k...), r: r})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, m := range moves {
		if err := b.Delete(m.old); err != nil {
			return 0, err
		}
		if err := b.Put(m.r.Key(), encode(&m.r)); err != nil {
			return 0, fmt.Errorf("upgrade record: %w", err)
		}
	}
	if len(moves) > 0 {
		if err := m.Delete(tallyKey); err != nil { // counted afresh
			return 0, err
		}
	}
	return len(moves), m.Put(layoutKey, layout)
}

// Room returns the room key of a token.
func Room(token string) string {
	d := sha256.Sum256([]byte("agentassistant room\x00" + token))
	return hex.EncodeToString(d[:16])
}

// stamp is t in Unix nanoseconds for keys, clamped to what int64 holds
// (1970 to 2262), so any time, even one a client made up, has a place.
func stamp(t time.Time) uint64 {
	switch {
	case t.Before(time.Unix(0, 0)):
		return 0
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return uint64(t.UnixNano()) // #nosec G115 -- not negative, checked above
}

// Key is where r is stored: room, creation time (16 hex digits of Unix
// nanoseconds, so keys sort by time) and ID.
func (r *Record) Key() []byte {
	k := make([]byte, 0, len(r.Room)+len(r.ID)+18)
	k = append(k, r.Room...)
	k = append(k, '/')
	k = appendStamp(k, r.CreatedAt)
	k = append(k, '/')
	return append(k, r.ID...)
}

// appendStamp appends t's stamp as 16 hex digits, as keys hold it.
func appendStamp(k []byte, t time.Time) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], stamp(t))
	return hex.AppendEncode(k, b[:])
}
