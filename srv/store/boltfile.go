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

// The bbolt file, read with plain reads for the start-up check (check.go).

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
	// walked are the leaf pages (with their overflow) whose records the
	// tree walk read; the salvage scan reads every other leaf. A page
	// marked seen may never have been read: a damaged page claiming it as
	// overflow, or reached twice.
	walked map[uint64]bool
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
		for i := id; i <= id+uint64(native.Uint32(b[12:])); i++ {
			f.walked[i] = true
		}
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
