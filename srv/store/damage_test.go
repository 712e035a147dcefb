package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A damaged store is opened by the tests below in a process of their own:
// a fault in a memory-mapped page (SIGBUS) or a panic in a goroutine the
// database starts would take the whole test binary down with it.
const childDirEnv = "AGENTASSISTANT_STORE_CHILD_DIR"

// TestOpenInChild is the child: it opens the stores in $childDirEnv (a
// list) one after the other, and prints the records each restored. Run by
// openInChild, skipped otherwise.
func TestOpenInChild(t *testing.T) {
	dirs := os.Getenv(childDirEnv)
	if dirs == "" {
		t.Skip("run by openInChild")
	}
	for i, dir := range filepath.SplitList(dirs) {
		fmt.Printf("OPENING %d\n", i)
		s, err := Open(dir, childOptions())
		if err != nil {
			fmt.Printf("OPEN ERROR %d: %v\n", i, err)
			continue
		}
		got := []string{}
		for _, r := range all(t, s) {
			got = append(got, line(r))
		}
		b, _ := json.Marshal(got)
		fmt.Printf("RESTORED %d: %s\n", i, b)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// openInChild opens the store in dir in a child process and returns what
// it restored (ID=status=text), or fails the test if the child crashed.
func openInChild(t *testing.T, dir string) []string {
	got, _ := openInChildLog(t, dir)
	return got[0]
}

// openInChildLog opens the stores in dirs in a child process, one after
// the other, and returns what each restored and what the child printed
// (the stores' logs among it).
func openInChildLog(t *testing.T, dirs ...string) ([][]string, string) {
	t.Helper()
	// A child that hangs is killed, and fails the test, rather than outlive it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestOpenInChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childDirEnv+"="+strings.Join(dirs, string(os.PathListSeparator)))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child opening the store died (%v):\n%s", err, tail(out, 40))
	}
	got := make([][]string, len(dirs))
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var i int
		var rest string
		if n, _ := fmt.Sscanf(sc.Text(), "OPEN ERROR %d: ", &i); n == 1 {
			t.Fatalf("the store refused to open: %s", sc.Text())
		}
		if n, _ := fmt.Sscanf(sc.Text(), "RESTORED %d: %s", &i, &rest); n == 2 && i < len(dirs) {
			if err := json.Unmarshal([]byte(sc.Text()[strings.Index(sc.Text(), ": ")+2:]), &got[i]); err != nil {
				t.Fatal(err)
			}
			seen++
		}
	}
	if seen != len(dirs) {
		t.Fatalf("the child printed %d results of %d:\n%s", seen, len(dirs), tail(out, 40))
	}
	return got, string(out)
}

func tail(b []byte, lines int) string {
	ls := strings.Split(string(b), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// aside returns the files kept aside in dir whose names start with name.
func aside(t *testing.T, dir, name string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, name+".damaged-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// texty makes records with distinct, recognizable texts, so a test can find
// each one's bytes in the files.
func texty(n, size int) []Record {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	out := make([]Record, n)
	for i := range out {
		r := sample("0123456789abcdef0123456789abcdef", fmt.Sprintf("req-%04d", i), t0.Add(time.Duration(i)*time.Second))
		r.Text = fmt.Sprintf("question %04d: %s", i, strings.Repeat(string(rune('a'+i%26)), size))
		if i%3 == 1 {
			r.Status, r.Reply, r.ClosedAt = Answered, []byte(fmt.Sprintf("answer %04d", i)), r.CreatedAt.Add(time.Minute)
		}
		out[i] = r
	}
	return out
}

func write(t *testing.T, dir string, rs []Record) {
	t.Helper()
	s := open(t, dir)
	for _, r := range rs {
		s.Put(r)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// One flipped byte in the first of three journal entries: the other two
// are still read, and the journal is kept for inspection.
func TestJournalReadsPastADamagedEntry(t *testing.T) {
	dir := t.TempDir()
	rs := texty(3, 10)
	var j []byte
	for i := range rs {
		j = journalEntry(j, encode(&rs[i]))
	}
	damaged := bytes.Clone(j)
	damaged[20] ^= 0x40 // inside the first record
	if err := os.WriteFile(filepath.Join(dir, JournalName), damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	s, err := Open(dir, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	got := all(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("restored %v, want the 2 intact records", ids(got))
	}
	if l := logged.String(); !strings.Contains(l, "journal was damaged") || !strings.Contains(l, "restored=2") ||
		!strings.Contains(l, "unreadable=\"") {
		t.Errorf("the loss was not logged: %s", l)
	}
	same(t, got[0], rs[1])
	same(t, got[1], rs[2])
	kept := aside(t, dir, JournalName)
	if len(kept) != 1 {
		t.Fatalf("damaged journal kept as %v, want one copy", kept)
	}
	if b, err := os.ReadFile(kept[0]); err != nil || !bytes.Equal(b, damaged) {
		t.Fatalf("the copy kept aside is not the damaged journal: %v", err)
	}
}

// flipAll flips a byte in every copy of needle in the database file (a
// record may be on more than one page: bbolt copies pages on write).
func flipAll(t *testing.T, path string, needle []byte, at int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := 0; ; {
		j := bytes.Index(b[i:], needle)
		if j < 0 {
			break
		}
		b[i+j+at] ^= 0x20
		i += j + len(needle)
		n++
	}
	if n == 0 {
		t.Fatalf("%q not in the database", needle)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A byte flipped in a record's text: that record is not restored with a
// text nobody typed, the others are, and the file is kept aside.
func TestDamagedRecordTextIsNotRestored(t *testing.T) {
	dir := t.TempDir()
	rs := texty(3, 40)
	write(t, dir, rs)
	flipAll(t, filepath.Join(dir, FileName), []byte(rs[1].Text), 20)
	res, logged := openInChildLog(t, dir)
	got := res[0]
	want := []string{line(rs[0]), line(rs[2])}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored\n%v\nwant\n%v", got, want)
	}
	if !strings.Contains(logged, "request store was damaged") || !strings.Contains(logged, "lost=1") || !strings.Contains(logged, rs[1].ID) {
		t.Errorf("the loss of %s was not logged:\n%s", rs[1].ID, logged)
	}
	if len(aside(t, dir, FileName)) != 1 {
		t.Fatal("the damaged database was not kept aside")
	}
}

// A record that no longer decodes is not dropped silently: the file is
// kept aside (and the loss logged).
func TestUndecodableRecordIsReported(t *testing.T) {
	dir := t.TempDir()
	rs := texty(3, 40)
	write(t, dir, rs)
	flipAll(t, filepath.Join(dir, FileName), encode(&rs[1])[:45], 0) // the format byte
	got := openInChild(t, dir)
	if want := []string{line(rs[0]), line(rs[2])}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored\n%v\nwant\n%v", got, want)
	}
	if len(aside(t, dir, FileName)) != 1 {
		t.Fatal("the damaged database was not kept aside")
	}
}

func line(r Record) string { return r.ID + "=" + r.Status + "=" + r.Text }

// intactAfter returns the records of rs of which a copy lies in the file
// wholly within pages that the damage [from, to) does not touch.
func intactAfter(t *testing.T, file []byte, rs []Record, from, to int) []string {
	t.Helper()
	const page = 4096
	var out []string
	for i := range rs {
		v := encode(&rs[i])
		for at := 0; ; {
			j := bytes.Index(file[at:], v)
			if j < 0 {
				break
			}
			start := (at + j) / page * page
			end := at + j + len(v)
			if end <= from || start >= to {
				out = append(out, line(rs[i]))
				break
			}
			at += j + 1
		}
	}
	return out
}

func contains(got []string, want []string) []string {
	have := make(map[string]bool, len(got))
	for _, g := range got {
		have[g] = true
	}
	var missing []string
	for _, w := range want {
		if !have[w] {
			missing = append(missing, strings.SplitN(w, "=", 2)[0])
		}
	}
	return missing
}

// A database cut short (a disk that filled, a copy interrupted): the server
// does not die of a fault on the missing pages; every record on the pages
// that are left comes back.
func TestTruncatedDatabase(t *testing.T) {
	dir := t.TempDir()
	rs := texty(300, 300)
	write(t, dir, rs)
	path := filepath.Join(dir, FileName)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := len(orig) / 2 / 4096 * 4096
	if err := os.Truncate(path, int64(cut)); err != nil {
		t.Fatal(err)
	}
	want := intactAfter(t, orig, rs, cut, len(orig))
	if len(want) == 0 {
		t.Fatal("no record below the cut: the test proves nothing")
	}
	got := openInChild(t, dir)
	if missing := contains(got, want); len(missing) > 0 {
		t.Fatalf("%d of %d intact records not restored: %v", len(missing), len(want), missing)
	}
	if len(contains(lines(rs), got)) > 0 {
		t.Fatalf("restored records that were never written: %v", contains(lines(rs), got))
	}
	if len(aside(t, dir, FileName)) != 1 {
		t.Fatal("the damaged database was not kept aside")
	}
}

func lines(rs []Record) []string {
	out := make([]string, len(rs))
	for i := range rs {
		out[i] = line(rs[i])
	}
	return out
}

// Pages overwritten with garbage, one at a time: no crash, no panic, every
// record on the other pages restored. All the damaged copies are opened by
// one child.
func TestGarbagePage(t *testing.T) {
	rs := texty(300, 300)
	base := t.TempDir()
	write(t, base, rs)
	orig, err := os.ReadFile(filepath.Join(base, FileName))
	if err != nil {
		t.Fatal(err)
	}
	pages := len(orig) / 4096
	type damage struct {
		name string
		dir  string
		want []string
	}
	var cases []damage
	for _, p := range []int{0, 1, 2, 3, pages / 2, pages - 2, pages - 1} {
		for _, fill := range []byte{0x00, 0xff, 0x5a} {
			dir := t.TempDir()
			b := bytes.Clone(orig)
			for i := p * 4096; i < (p+1)*4096; i++ {
				b[i] = fill ^ byte(i*7)
			}
			if err := os.WriteFile(filepath.Join(dir, FileName), b, 0o600); err != nil {
				t.Fatal(err)
			}
			cases = append(cases, damage{fmt.Sprintf("page %d filled with %#x", p, fill), dir, intactAfter(t, orig, rs, p*4096, (p+1)*4096)})
		}
	}
	dirs := make([]string, len(cases))
	for i, c := range cases {
		dirs[i] = c.dir
	}
	results, _ := openInChildLog(t, dirs...)
	for i, c := range cases {
		got := results[i]
		if missing := contains(got, c.want); len(missing) > 0 {
			t.Errorf("%s: %d of %d intact records not restored: %v", c.name, len(missing), len(c.want), missing)
		}
		if extra := contains(lines(rs), got); len(extra) > 0 {
			t.Errorf("%s: restored records that were never written: %v", c.name, extra)
		}
	}
}

// childOptions log to stdout, where openInChildLog reads them.
func childOptions() Options {
	return Options{Logger: slog.New(slog.NewTextHandler(os.Stdout, nil))}
}

// boltImage is a database file of three 4 KiB pages: the two meta pages
// and, as the root, the leaf page root.
func boltImage(root []byte) []byte {
	const ps = 4096
	b := make([]byte, 3*ps)
	for i := range 2 {
		p := b[i*ps:]
		native.PutUint64(p, uint64(i))
		native.PutUint16(p[8:], 0x04) // meta
		m := p[pageHeaderSize:]
		native.PutUint32(m, boltMagic)
		native.PutUint32(m[4:], boltVersion)
		native.PutUint32(m[8:], ps)
		native.PutUint64(m[16:], 2) // root page
		native.PutUint64(m[32:], noFreelist)
		native.PutUint64(m[40:], 3) // high water mark
		native.PutUint64(m[48:], uint64(i+1))
		h := fnv.New64a()
		h.Write(m[:56])
		native.PutUint64(m[56:], h.Sum64())
	}
	copy(b[2*ps:], root)
	native.PutUint64(b[2*ps:], 2)
	return b
}

// pageOf is a leaf page (or an inline bucket's page) of elements that each
// point at the same value: the bytes after the elements.
func pageOf(flags uint32, n int, value []byte) []byte {
	p := make([]byte, pageHeaderSize+n*elementSize)
	native.PutUint16(p[8:], leafPage)
	native.PutUint16(p[10:], uint16(n))
	for i := range n {
		e := p[pageHeaderSize+i*elementSize:]
		native.PutUint32(e, flags)
		native.PutUint32(e[4:], uint32((n-i)*elementSize)) // the value, just past the last element
		native.PutUint32(e[12:], uint32(len(value)))
	}
	return append(p, value...)
}

// Inline buckets whose two elements both point at the same nested inline
// bucket, sixty deep, in one page: 2^60 visits if the walk believed them.
// Open checks the file in time proportional to its size, and starts.
func TestInlineBucketsPointingAtTheSameBytes(t *testing.T) {
	inner := pageOf(0, 0, nil)
	for range 60 {
		inner = pageOf(bucketElement, 2, append(make([]byte, bucketHeaderSize), inner...))
	}
	root := pageOf(bucketElement, 1, append(make([]byte, bucketHeaderSize), inner...))
	if len(root) > 4096 {
		t.Fatalf("the root is %d bytes, more than a page", len(root))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), boltImage(root), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := openInChild(t, dir); len(got) != 0 {
		t.Fatalf("restored %v from a file with no records", got)
	}
	if len(aside(t, dir, FileName)) != 1 {
		t.Fatal("the damaged database was not kept aside")
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.ReaderAt
	n int64
}

func (c *countingReader) ReadAt(b []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(b, off)
	c.n += int64(n)
	return n, err
}

// A file whose every page says it is a leaf running to the end of the
// file: the salvage of a damaged file read each one whole, the rest of the
// file again for every page (and allocated as much), quadratic in the
// file's size. It reads a bounded multiple of the file instead.
func TestLeavesClaimingTheRestOfTheFile(t *testing.T) {
	const pages, psize = 512, 4096
	b := make([]byte, pages*psize)
	for id := range pages {
		h := b[id*psize:]
		native.PutUint64(h, uint64(id))
		native.PutUint16(h[8:], leafPage)
		native.PutUint32(h[12:], ^uint32(0)) // overflow past the end
	}
	r := &countingReader{r: bytes.NewReader(b)}
	c := checkFile(r, int64(len(b)))
	if !c.damaged() {
		t.Fatal("a file of bare leaves passed the check")
	}
	if !slices.ContainsFunc(c.problems, func(p string) bool { return strings.Contains(p, "not looked for") }) {
		t.Errorf("problems %q do not say the salvage stopped", c.problems)
	}
	if limit := 8 * int64(len(b)); r.n > limit {
		t.Errorf("the check read %d bytes of a %d-byte file, more than %d", r.n, len(b), limit)
	}
}

// A journal crafted so that, at every 16th byte, the length there covers
// half the file and the next byte is the record format's: looking for the
// next sound entry after the first bad one checksummed half the file at
// each of them, quadratic in the journal's size (a 64 MiB journal took
// most of an hour to open). It checksums a bounded multiple of the
// journal instead, and says which bytes it could not read.
func TestJournalOfFalseStarts(t *testing.T) {
	const size = 1 << 20
	b := make([]byte, size)
	for off := 0; off+16 <= size; off += 16 {
		binary.LittleEndian.PutUint32(b[off:], size/2)
		b[off+8] = formatWire
	}
	var summed int
	testHookChecksum = func(n int) { summed += n }
	defer func() { testHookChecksum = nil }()
	rs, bad := readJournal(b)
	if len(rs) != 0 || len(bad) == 0 {
		t.Fatalf("read %d records, %d bad ranges, from a journal of false starts", len(rs), len(bad))
	}
	if limit := 8 * size; summed > limit {
		t.Errorf("checksummed %d bytes of a %d-byte journal, more than %d", summed, size, limit)
	}
}
