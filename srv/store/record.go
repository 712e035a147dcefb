package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/encoding/protowire"
)

// A record is stored as a format byte followed by protobuf wire-format
// fields (numbers below): compact, cheap to encode, and unknown fields
// are skipped, so later versions can add fields. Stores written before
// this format hold JSON (first byte '{'); they are rewritten on Open.
//
// The last field is always a CRC-32C of everything before it (fSum), so a
// record whose bytes were damaged on disk is found out instead of restored
// with a text nobody typed; fields a later version adds go before it.
// Records of the second layout have none; Open rewrites them with one.
const formatWire = 1

// fSum is the checksum field: numbered well past the fields below, so they
// can grow.
const fSum protowire.Number = 100

const (
	fRoom protowire.Number = iota + 1
	fID
	fKind
	fProjectDirectory
	fText
	fTimeoutSeconds
	fCreatedAt // Unix nanoseconds
	fDeadline  // Unix nanoseconds
	fStatus
	fReply
	fClosedAt // Unix nanoseconds; absent while pending
	fClosedNote
	fAgentName
	fReasoningModelName
	fMcpClientName
)

func encode(r *Record) []byte {
	b := make([]byte, 1, 72+len(r.Room)+len(r.ID)+len(r.ProjectDirectory)+len(r.Text)+len(r.Reply)+len(r.ClosedNote)+
		len(r.AgentName)+len(r.ReasoningModelName)+len(r.McpClientName))
	b[0] = formatWire
	str := func(n protowire.Number, v string) {
		if v != "" {
			b = protowire.AppendTag(b, n, protowire.BytesType)
			b = protowire.AppendString(b, v)
		}
	}
	num := func(n protowire.Number, v int64) {
		if v != 0 {
			b = protowire.AppendTag(b, n, protowire.VarintType)
			b = protowire.AppendVarint(b, protowire.EncodeZigZag(v))
		}
	}
	at := func(n protowire.Number, t time.Time) {
		if !t.IsZero() {
			num(n, t.UnixNano())
		}
	}
	str(fRoom, r.Room)
	str(fID, r.ID)
	num(fKind, int64(r.Kind))
	str(fProjectDirectory, r.ProjectDirectory)
	str(fText, r.Text)
	num(fTimeoutSeconds, r.TimeoutSeconds)
	at(fCreatedAt, r.CreatedAt)
	at(fDeadline, r.Deadline)
	str(fStatus, r.Status)
	if len(r.Reply) > 0 {
		b = protowire.AppendTag(b, fReply, protowire.BytesType)
		b = protowire.AppendBytes(b, r.Reply)
	}
	at(fClosedAt, r.ClosedAt)
	str(fClosedNote, r.ClosedNote)
	str(fAgentName, r.AgentName)
	str(fReasoningModelName, r.ReasoningModelName)
	str(fMcpClientName, r.McpClientName)
	sum := crc32.Checksum(b, castagnoli)
	b = protowire.AppendTag(b, fSum, protowire.Fixed32Type)
	return protowire.AppendFixed32(b, sum)
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
	*r = Record{}
	for b := v[1:]; len(b) > 0; {
		at := len(v) - len(b) // where this field starts
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return false, errDamaged
		}
		b = b[l:]
		if n == fSum && typ == protowire.Fixed32Type {
			sum, l := protowire.ConsumeFixed32(b)
			if l < 0 || l != len(b) || sum != crc32.Checksum(v[:at], castagnoli) {
				return false, errDamaged // a damaged sum, a damaged record, or bytes after the end
			}
			return true, nil
		}
		switch typ {
		case protowire.BytesType:
			val, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return false, errDamaged
			}
			b = b[l:]
			switch n {
			case fRoom:
				r.Room = string(val)
			case fID:
				r.ID = string(val)
			case fProjectDirectory:
				r.ProjectDirectory = string(val)
			case fText:
				r.Text = string(val)
			case fStatus:
				r.Status = string(val)
			case fReply:
				r.Reply = append([]byte(nil), val...)
			case fClosedNote:
				r.ClosedNote = string(val)
			case fAgentName:
				r.AgentName = string(val)
			case fReasoningModelName:
				r.ReasoningModelName = string(val)
			case fMcpClientName:
				r.McpClientName = string(val)
			}
		case protowire.VarintType:
			u, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return false, errDamaged
			}
			b = b[l:]
			x := protowire.DecodeZigZag(u)
			at := time.Time{} // 0 is never written: it stands for no time
			if x != 0 {
				at = time.Unix(0, x)
			}
			switch n {
			case fKind:
				r.Kind = int(x)
			case fTimeoutSeconds:
				r.TimeoutSeconds = x
			case fCreatedAt:
				r.CreatedAt = at
			case fDeadline:
				r.Deadline = at
			case fClosedAt:
				r.ClosedAt = at
			}
		default:
			l := protowire.ConsumeFieldValue(n, typ, b)
			if l < 0 {
				return false, errDamaged
			}
			b = b[l:]
		}
	}
	return false, nil
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
