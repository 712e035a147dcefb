package store

import (
	"encoding/binary"
	"hash/crc32"

	bolt "go.etcd.io/bbolt"
)

// tallyKey, in the meta bucket, holds the tally of the records bucket: how
// many records it holds and a checksum of all of them (the XOR of one per
// key and value), kept up to date by every write in the same transaction.
// Open checks it against what the tree holds: a branch page whose count
// was damaged drops a whole subtree without any other sign, and a page
// number damaged into that of an earlier copy of a page brings back old
// records, also without any other sign.
var tallyKey = []byte("tally")

type tally struct {
	n   uint64
	sum uint64
}

var ieee = crc32.MakeTable(crc32.IEEE)

// pairSum is the checksum of one key and value: two CRC-32s (both done in
// hardware on common CPUs), of the key's length, the key and the value.
func pairSum(k, v []byte) uint64 {
	var l [4]byte
	binary.LittleEndian.PutUint32(l[:], uint32(len(k))) // #nosec G115 -- keys are far below 4 GiB
	a := crc32.Update(crc32.Update(crc32.Checksum(l[:], castagnoli), castagnoli, k), castagnoli, v)
	b := crc32.Update(crc32.Update(crc32.Checksum(l[:], ieee), ieee, k), ieee, v)
	return uint64(a)<<32 | uint64(b)
}

func (t *tally) add(k, v []byte)    { t.n++; t.sum ^= pairSum(k, v) }
func (t *tally) remove(k, v []byte) { t.n--; t.sum ^= pairSum(k, v) }

// put accounts for b.Put(k, v), which replaces old.
func (t *tally) put(k, old, v []byte) {
	if old != nil {
		t.remove(k, old)
	}
	t.add(k, v)
}

func (t *tally) bytes() []byte {
	b := binary.LittleEndian.AppendUint64(nil, t.n)
	return binary.LittleEndian.AppendUint64(b, t.sum)
}

func (t *tally) read(b []byte) bool {
	if len(b) != 16 {
		return false
	}
	t.n, t.sum = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
	return true
}

// loadTally returns the tally of the records bucket, counting it afresh
// when the store has none yet (it was written before tallies).
func loadTally(tx *bolt.Tx) (tally, error) {
	var t tally
	if t.read(tx.Bucket(meta).Get(tallyKey)) {
		return t, nil
	}
	err := tx.Bucket(requests).ForEach(func(k, v []byte) error {
		if v != nil {
			t.add(k, v)
		}
		return nil
	})
	return t, err
}

func (t *tally) save(tx *bolt.Tx) error {
	return tx.Bucket(meta).Put(tallyKey, t.bytes())
}

// deletedKey, in the meta bucket, counts the records the store deleted
// on purpose (cleared, pruned, evicted past a room's budget), in the
// same transactions. The manifest keeps the count it last saw, so that
// Open tells records deleted by a commit whose manifest a crash cut off
// from records lost.
var deletedKey = []byte("deleted")

func loadDeleted(tx *bolt.Tx) uint64 {
	if v := tx.Bucket(meta).Get(deletedKey); len(v) == 8 {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func addDeleted(tx *bolt.Tx, n int) (uint64, error) {
	d := loadDeleted(tx)
	if n == 0 {
		return d, nil
	}
	d += uint64(n) // #nosec G115 -- a count of records
	return d, tx.Bucket(meta).Put(deletedKey, binary.LittleEndian.AppendUint64(nil, d))
}

// counts are what the database holds and has deleted, after a commit.
type counts struct{ records, deleted uint64 }
