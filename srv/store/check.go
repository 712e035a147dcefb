package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"slices"
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

// The bbolt file format (version 2), as bbolt writes it: pages of the size
// its meta page gives, in the byte order of the machine that wrote it.
const (
	pageHeaderSize   = 16 // id u64, flags u16, count u16, overflow u32
	elementSize      = 16 // branch: pos u32, ksize u32, page u64; leaf: flags u32, pos u32, ksize u32, vsize u32
	bucketHeaderSize = 16 // root page u64, sequence u64
	metaSize         = 64 // magic, version, page size, flags, root bucket, freelist, high water, txid, checksum
	branchPage       = 0x01
	leafPage         = 0x02
	freelistPage     = 0x10
	bucketElement    = 0x01
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	noFreelist       = ^uint64(0)
	maxDepth         = 64 // far beyond any real tree; a cycle of pages stops here
)

var native = binary.NativeEndian

type boltMeta struct {
	pageSize, root, freelist, hwm, txid uint64
}

// parseMeta reads the meta page in b, if it is sound.
func parseMeta(b []byte) (boltMeta, bool) {
	if len(b) < pageHeaderSize+metaSize {
		return boltMeta{}, false
	}
	m := b[pageHeaderSize:]
	h := fnv.New64a()
	_, _ = h.Write(m[:56])
	if native.Uint32(m) != boltMagic || native.Uint32(m[4:]) != boltVersion || h.Sum64() != native.Uint64(m[56:]) {
		return boltMeta{}, false
	}
	meta := boltMeta{pageSize: uint64(native.Uint32(m[8:])), root: native.Uint64(m[16:]),
		freelist: native.Uint64(m[32:]), hwm: native.Uint64(m[40:]), txid: native.Uint64(m[48:])}
	if meta.pageSize < 1024 || meta.pageSize > 1<<24 || meta.root < 2 || meta.root >= meta.hwm || meta.hwm > (1<<62)/meta.pageSize {
		return boltMeta{}, false
	}
	return meta, true
}

// boltFile reads one database file.
type boltFile struct {
	r       io.ReaderAt
	size    int64
	psize   int64
	meta    boltMeta
	hasMeta bool
	old     bool            // the store says it is of an earlier layout: records without a checksum are sound
	seen    map[uint64]bool // pages of the tree, each read once
	// budget is how many more elements a walk may visit. Each element of
	// a sound file takes 16 bytes of it, so the file's size bounds them;
	// damaged inline buckets can point their elements at the same bytes
	// again and again, and would make the walk exponential.
	budget   int64
	problems []string
	// scanStopped is the page where scan stopped looking for records
	// (0: it did not).
	scanStopped int64
}

func (f *boltFile) problem(format string, args ...any) {
	if len(f.problems) < maxProblems {
		f.problems = append(f.problems, fmt.Sprintf(format, args...))
	} else if len(f.problems) == maxProblems {
		f.problems = append(f.problems, "and more")
	}
}

const maxProblems = 20

// readMetas finds the meta page bbolt would use: the sound one with the
// highest transaction. A meta page that is not sound is a problem even when
// the other is: bbolt would silently fall back to the commit before.
func (f *boltFile) readMetas() {
	var first [4096]byte
	n, _ := f.r.ReadAt(first[:], 0)
	m0, ok0 := parseMeta(first[:n])
	var m1 boltMeta
	ok1 := false
	if ok0 {
		m1, ok1 = f.metaAt(int64(m0.pageSize)) // #nosec G115 -- parseMeta bounds it to 16 MiB
	} else {
		for i := range 15 { // as bbolt looks for the second meta page
			if m1, ok1 = f.metaAt(1024 << i); ok1 && m1.pageSize == 1024<<i {
				break
			}
			ok1 = false
		}
	}
	switch {
	case ok0 && ok1:
		f.meta = m0
		if m1.txid > m0.txid {
			f.meta = m1
		}
	case ok0:
		f.meta = m0
		f.problem("meta page 1 is damaged")
	case ok1:
		f.meta = m1
		f.problem("meta page 0 is damaged")
	default:
		f.psize = int64(os.Getpagesize())
		f.problem("both meta pages are damaged: it is not a database bbolt can open")
		return
	}
	f.hasMeta = true
	// parseMeta bounds both: a page is at most 16 MiB, pages times size at most 2^62.
	f.psize = int64(f.meta.pageSize)        // #nosec G115 -- see above
	if f.size < int64(f.meta.hwm)*f.psize { // #nosec G115 -- see above
		f.problem("the file is %d bytes, %d short of its %d pages: it was cut short", f.size, int64(f.meta.hwm)*f.psize-f.size, f.meta.hwm) // #nosec G115 -- see above
	}
}

func (f *boltFile) metaAt(off int64) (boltMeta, bool) {
	b := make([]byte, pageHeaderSize+metaSize)
	if _, err := f.r.ReadAt(b, off); err != nil {
		return boltMeta{}, false
	}
	return parseMeta(b)
}

// page reads page id of the tree, with its overflow, checking it the way
// bbolt will: within the file and the high water mark, the number it says
// it has, a branch or leaf, reached once.
func (f *boltFile) page(id uint64) ([]byte, error) {
	if id < 2 || id >= f.meta.hwm || int64(id+1)*f.psize > f.size { // #nosec G115 -- id < hwm, which parseMeta bounds
		return nil, fmt.Errorf("page %d is outside the database", id)
	}
	off := int64(id) * f.psize // #nosec G115 -- as above
	var h [pageHeaderSize]byte
	if _, err := f.r.ReadAt(h[:], off); err != nil {
		return nil, fmt.Errorf("read page %d: %w", id, err)
	}
	if got := native.Uint64(h[:]); got != id {
		return nil, fmt.Errorf("page %d says it is page %d", id, got)
	}
	over := uint64(native.Uint32(h[12:]))
	if id+over >= f.meta.hwm || int64(id+over+1)*f.psize > f.size { // #nosec G115 -- over is 32 bits, id < hwm
		return nil, fmt.Errorf("page %d runs past the end of the database", id)
	}
	for i := id; i <= id+over; i++ {
		if f.seen[i] {
			return nil, fmt.Errorf("page %d is reached twice", i)
		}
		f.seen[i] = true
	}
	b := make([]byte, int64(over+1)*f.psize) // #nosec G115 -- within the file's size, checked above
	if _, err := f.r.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("read page %d: %w", id, err)
	}
	if fl := native.Uint16(b[8:]); fl != branchPage && fl != leafPage {
		return nil, fmt.Errorf("page %d is neither a branch nor a leaf (flags %#x)", id, fl)
	}
	return b, nil
}

// elements returns the bounds of each element of page b whose count and
// offsets fit in b; ok is false when any does not.
type element struct {
	flags      uint32
	key, value []byte
	child      uint64 // of a branch element
}

func elements(b []byte) ([]element, bool) {
	if len(b) < pageHeaderSize {
		return nil, false
	}
	flags, count := native.Uint16(b[8:]), int(native.Uint16(b[10:]))
	if pageHeaderSize+count*elementSize > len(b) {
		return nil, false
	}
	out := make([]element, 0, count)
	ok := true
	for i := range count {
		at := pageHeaderSize + i*elementSize
		e := b[at:]
		var el element
		var pos, ksize, vsize int64
		switch flags {
		case branchPage:
			pos, ksize, el.child = int64(native.Uint32(e)), int64(native.Uint32(e[4:])), native.Uint64(e[8:])
		case leafPage:
			el.flags = native.Uint32(e)
			pos, ksize, vsize = int64(native.Uint32(e[4:])), int64(native.Uint32(e[8:])), int64(native.Uint32(e[12:]))
		default:
			return nil, false
		}
		k := int64(at) + pos
		if k+ksize+vsize > int64(len(b)) {
			ok = false
			continue
		}
		el.key, el.value = b[k:k+ksize], b[k+ksize:k+ksize+vsize]
		out = append(out, el)
	}
	return out, ok
}

// visit is told each key and value of a bucket, in order.
type visit func(path []string, k, v []byte)

// bucket walks the bucket whose header is hdr (the value of its element in
// the parent): nested buckets too.
func (f *boltFile) bucket(path []string, hdr []byte, depth int, fn visit) {
	if len(hdr) < bucketHeaderSize {
		f.problem("bucket %q: its header is %d bytes", path, len(hdr))
		return
	}
	root := native.Uint64(hdr)
	if root == 0 { // inline: a leaf page inside the value
		in := hdr[bucketHeaderSize:]
		if len(in) < pageHeaderSize || native.Uint16(in[8:]) != leafPage {
			f.problem("bucket %q: its inline page is damaged", path)
			return
		}
		es, ok := elements(in)
		if !ok {
			f.problem("bucket %q: its inline page is damaged", path)
		}
		f.leaves(path, 0, es, nil, nil, depth, fn)
		return
	}
	f.tree(path, root, nil, nil, depth, fn)
}

// tree walks the pages under id, checking the order of keys as bbolt does:
// every key of a subtree at or after its branch key and before the next
// one. It returns the last key it saw.
func (f *boltFile) tree(path []string, id uint64, lo, hi []byte, depth int, fn visit) []byte {
	if depth > maxDepth {
		f.problem("bucket %q: pages nest deeper than %d", path, maxDepth)
		return nil
	}
	b, err := f.page(id)
	if err != nil {
		f.problem("bucket %q: %v", path, err)
		return nil
	}
	es, ok := elements(b)
	if !ok {
		f.problem("bucket %q: page %d: elements run past the page", path, id)
	}
	if native.Uint16(b[8:]) == leafPage {
		return f.leaves(path, id, es, lo, hi, depth, fn)
	}
	last := lo
	for i, e := range es {
		if !f.spend() {
			return last
		}
		f.order(path, id, i, e.key, last, hi)
		next := hi
		if i+1 < len(es) {
			next = es[i+1].key
		}
		last = f.tree(path, e.child, e.key, next, depth+1, fn)
	}
	return last
}

func (f *boltFile) leaves(path []string, id uint64, es []element, lo, hi []byte, depth int, fn visit) []byte {
	last := lo
	for i, e := range es {
		if !f.spend() {
			return last
		}
		f.order(path, id, i, e.key, last, hi)
		last = e.key
		if e.flags&bucketElement != 0 {
			f.bucket(append(slices.Clip(path), string(e.key)), e.value, depth+1, fn)
			continue
		}
		fn(path, e.key, e.value)
	}
	return last
}

// spend takes one element from the budget, and reports whether there was
// one.
func (f *boltFile) spend() bool {
	f.budget--
	if f.budget == -1 {
		f.problem("more elements than the file has room for: its pages point into each other")
	}
	return f.budget >= 0
}

// order is bbolt's key order check: the first key at or after the one
// before, the others after it, all before hi.
func (f *boltFile) order(path []string, id uint64, i int, k, prev, hi []byte) {
	c := bytes.Compare(prev, k)
	switch {
	case i == 0 && prev != nil && c > 0, i > 0 && c >= 0:
		f.problem("bucket %q: page %d: key %d is out of order", path, id, i)
	case hi != nil && bytes.Compare(k, hi) >= 0:
		f.problem("bucket %q: page %d: key %d is past its branch", path, id, i)
	}
}

// checkFreelist checks the freelist page bbolt reads on opening a file
// that has one (this store writes none, earlier ones may have).
func (f *boltFile) checkFreelist() {
	id := f.meta.freelist
	if id == noFreelist {
		return
	}
	if id < 2 || id >= f.meta.hwm || int64(id+1)*f.psize > f.size { // #nosec G115 -- id < hwm, which parseMeta bounds
		f.problem("the freelist page %d is outside the database", id)
		return
	}
	var h [pageHeaderSize + 8]byte
	if _, err := f.r.ReadAt(h[:], int64(id)*f.psize); err != nil { // #nosec G115 -- as above
		f.problem("read the freelist: %v", err)
		return
	}
	over, count := uint64(native.Uint32(h[12:])), uint64(native.Uint16(h[10:]))
	head := uint64(pageHeaderSize)
	if count == 0xFFFF {
		count, head = native.Uint64(h[pageHeaderSize:]), pageHeaderSize+8
	}
	switch {
	case native.Uint64(h[:]) != id || native.Uint16(h[8:]) != freelistPage:
		f.problem("the freelist page %d is not one", id)
	case id+over >= f.meta.hwm || count > uint64(f.size) || head+count*8 > (over+1)*uint64(f.psize): // #nosec G115 -- sizes are never negative
		f.problem("the freelist page %d runs past its end", id)
	default:
		for i := id; i <= id+over; i++ {
			if f.seen[i] {
				f.problem("the freelist page %d is also in the tree", i)
			}
		}
	}
}

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
	f := &boltFile{r: r, size: size, seen: make(map[uint64]bool), budget: size/elementSize + 16}
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
		if f.seen[uint64(id)] {
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
