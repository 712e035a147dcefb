package store

import (
	"bytes"
	"fmt"
	"io"
)

// Reading the database file without bbolt: to check it before bbolt opens
// it, and to salvage what a damaged one still holds.
//
// bbolt trusts its file. A page number past the end of a truncated file
// faults on the memory map (SIGBUS); a damaged page panics on one of the
// goroutines bbolt starts to walk the tree while opening, where nothing can
// recover it. So Open reads the file first with plain reads, every offset
// checked against the file and every page against what bbolt will expect
// of it (the checks of bbolt's own Tx.Check), and lets bbolt open only a
// file that passes. A file that does not is set aside and its records are
// salvaged: those the tree still reaches, and those on leaf pages it no
// longer reaches (a damaged branch page, a truncated file).

// checked is what checkFile found.
type checked struct {
	problems []string
	recs     map[string]Record // by key: every intact record, when damaged
	lost     []string          // keys of damaged records with no intact copy
	fromScan int               // records found only on pages the tree does not reach
}

func (c *checked) damaged() bool { return c != nil && len(c.problems) > 0 }

// checkFile checks the database in r (size bytes). A sound file gives no
// problems and no records (bbolt reads them); a damaged one, the problems
// and every intact record it holds. The check keeps nothing of what it
// reads; only a damaged file is read a second time, for its records.
func checkFile(r io.ReaderAt, size int64) *checked {
	first, _, _ := readFile(r, size, false)
	c := &checked{problems: first.problems}
	if !c.damaged() {
		return c
	}
	var f *boltFile
	var bad []string
	f, c.recs, bad = readFile(r, size, true)
	c.fromScan = f.scan(c.recs, f.old)
	if f.scanStopped > 0 {
		c.problems = append(c.problems, fmt.Sprintf("its leaf pages claim the same bytes over and over: records from page %d on were not looked for", f.scanStopped))
	}
	for _, k := range bad {
		if _, ok := c.recs[k]; !ok {
			c.lost = append(c.lost, k)
		}
	}
	return c
}

// readFile walks the database in r, checking it, and returns what is wrong
// with it, and with keep its intact records (by key) and the keys of
// damaged ones.
func readFile(r io.ReaderAt, size int64, keep bool) (*boltFile, map[string]Record, []string) {
	f := &boltFile{r: r, size: size, seen: make(map[uint64]bool), walked: make(map[uint64]bool), budget: size/elementSize + 16}
	f.readMetas()
	recs := make(map[string]Record)
	var bad, unsummed []string
	if !f.hasMeta {
		return f, recs, nil
	}
	var count tally
	var stored, lay []byte
	f.seen[0], f.seen[1] = true, true
	f.tree(nil, f.meta.root, nil, nil, 0, func(path []string, k, v []byte) {
		switch {
		case len(path) == 1 && path[0] == string(requests):
			count.add(k, v)
			var rec Record
			summed, err := decodeSummed(v, &rec)
			if err == nil && v[0] == formatWire && !bytes.Equal(k, rec.Key()) {
				err = errDamaged
			}
			if err != nil {
				f.problem("record %s is damaged", k)
				bad = append(bad, string(k))
				return
			}
			if !summed && v[0] == formatWire {
				unsummed = append(unsummed, string(k)) // damaged, unless the store is of an earlier layout
			}
			if keep {
				recs[string(rec.Key())] = rec
			}
		case len(path) == 1 && path[0] == string(meta) && string(k) == string(tallyKey):
			stored = bytes.Clone(v)
		case len(path) == 1 && path[0] == string(meta) && string(k) == string(layoutKey):
			lay = bytes.Clone(v)
		}
	})
	f.old = lay != nil && !bytes.Equal(lay, layout)
	if bytes.Equal(lay, layout) {
		for _, k := range unsummed {
			f.problem("record %s is damaged: it lost its checksum", k)
			bad = append(bad, k)
			delete(recs, k)
		}
	}
	f.checkFreelist()
	if stored != nil && !bytes.Equal(stored, count.bytes()) {
		var want tally
		want.read(stored)
		f.problem("the database holds %d records where %d were written, or some differ from what was written", count.n, want.n)
	}
	return f, recs, bad
}

// decodeAt decodes the record stored under k. A record in the wire format
// must be under its own key, and with its checksum unless old says the
// store may hold records of an earlier layout.
func decodeAt(k, v []byte, r *Record, old bool) error {
	summed, err := decodeSummed(v, r)
	if err != nil {
		return err
	}
	if v[0] == formatWire && (!bytes.Equal(k, r.Key()) || (!summed && !old)) {
		return errDamaged
	}
	return nil
}

// scan reads every leaf page the tree did not reach and adds the records
// it finds there to recs: only those in the wire format under their own
// key, with their checksum unless old (the store says it is of an earlier
// layout), and where recs has the record already, only a later stage of it (an
// answer over the pending question). Pages no longer in use hold earlier
// copies of records too: a later stage always wins, so an earlier copy
// never hides what happened since. It returns how many it added.
func (f *boltFile) scan(recs map[string]Record, old bool) int {
	added := 0
	f.budget = f.size/elementSize + 16
	// A leaf and its overflow are read whole, and a leaf no longer in use
	// may claim pages other leaves now hold, so some bytes are read more
	// than once; but leaves that each claim the rest of the file would
	// have it read once per page. The bytes read stop at a few times the
	// file's size.
	bytesLeft := 4 * f.size
	var h [pageHeaderSize]byte
	for id := int64(2); id*f.psize+pageHeaderSize <= f.size; id++ { // the last page may be cut short
		if f.walked[uint64(id)] {
			continue
		}
		off := id * f.psize
		if _, err := f.r.ReadAt(h[:], off); err != nil {
			continue
		}
		if native.Uint64(h[:]) != uint64(id) || native.Uint16(h[8:]) != leafPage {
			continue
		}
		n := min((int64(native.Uint32(h[12:]))+1)*f.psize, f.size-off)
		if bytesLeft -= n; bytesLeft < 0 {
			f.scanStopped = id
			break
		}
		b := make([]byte, n)
		if _, err := f.r.ReadAt(b, off); err != nil {
			continue
		}
		added += f.scanLeaf(b, recs, old, 0)
	}
	return added
}

func (f *boltFile) scanLeaf(b []byte, recs map[string]Record, old bool, depth int) int {
	es, _ := elements(b)
	added := 0
	for _, e := range es {
		if f.budget--; f.budget < 0 {
			return added
		}
		if e.flags&bucketElement != 0 {
			if depth < 4 && len(e.value) > bucketHeaderSize && native.Uint64(e.value) == 0 {
				added += f.scanLeaf(e.value[bucketHeaderSize:], recs, old, depth+1)
			}
			continue
		}
		var r Record
		if len(e.value) == 0 || e.value[0] != formatWire || decodeAt(e.key, e.value, &r, old) != nil {
			continue
		}
		old, ok := recs[string(e.key)]
		if ok && stage(old) >= stage(r) {
			continue
		}
		recs[string(e.key)] = r
		if !ok {
			added++
		}
	}
	return added
}

// stage orders the copies of one record: pending, then settled.
func stage(r Record) int {
	if r.Status == Pending {
		return 0
	}
	return 1
}
