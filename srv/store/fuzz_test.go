package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// openBase is a store as a server leaves it when it is killed: a database
// whose records were written over several commits (so its free pages hold
// earlier copies of some), and a journal with what came after the last
// fold.
type openBase struct {
	db, journal []byte
	versions    map[string][]Record // every version ever written, by ID
	latest      map[string]Record   // what a sound store restores
	inJournal   map[string][2]int   // the journal entry of an ID: its bytes
	copies      map[string][][2]int // where the latest version lies in the database: from its page's start to its end
}

var (
	baseOnce sync.Once
	base     openBase
	baseErr  error
)

func makeBase(dir string) (openBase, error) {
	b := openBase{versions: make(map[string][]Record), latest: make(map[string]Record),
		inJournal: make(map[string][2]int), copies: make(map[string][][2]int)}
	keep := func(r Record) {
		b.versions[r.ID] = append(b.versions[r.ID], r)
		b.latest[r.ID] = r
	}
	s, err := Open(dir, Options{})
	if err != nil {
		return b, err
	}
	rs := texty(150, 200)
	for _, r := range rs[:100] {
		s.Put(r)
		keep(r)
	}
	s.Flush()
	for i, r := range rs[:100] {
		if r.Status == Pending && i%4 == 0 { // answered in a later commit
			r.Status, r.Reply, r.ClosedAt = Answered, []byte("later"), r.CreatedAt.Add(time.Hour)
			s.Put(r)
			keep(r)
		}
	}
	s.Flush()
	for _, r := range rs[100:140] {
		s.Put(r)
		keep(r)
	}
	if err := s.Close(); err != nil {
		return b, err
	}
	if b.db, err = os.ReadFile(filepath.Join(dir, FileName)); err != nil {
		return b, err
	}
	// The journal: new requests, and an answer to one in the database.
	later := rs[140:]
	answer := rs[2]
	answer.Status, answer.Reply, answer.ClosedAt = Answered, []byte("from the journal"), answer.CreatedAt.Add(2*time.Hour)
	later = append(later, answer)
	for _, r := range later {
		start := len(b.journal)
		b.journal = journalEntry(b.journal, encode(&r))
		b.inJournal[r.ID] = [2]int{start, len(b.journal)}
		keep(r)
	}
	for id, r := range b.latest {
		if _, ok := b.inJournal[id]; ok {
			continue
		}
		v := encode(&r)
		for at := 0; ; {
			j := bytes.Index(b.db[at:], v)
			if j < 0 {
				break
			}
			b.copies[id] = append(b.copies[id], [2]int{(at + j) / 4096 * 4096, at + j + len(v)})
			at += j + 1
		}
	}
	return b, nil
}

func untouched(r [2]int, from, to, cut int) bool {
	return r[1] <= cut && (r[1] <= from || r[0] >= to)
}

// FuzzOpen damages the database or the journal (bytes overwritten at an
// offset, the file cut short) and opens the store: no panic, no fault, no
// refusal; every record restored is one that was written; every record of
// which an intact copy is left is restored as it last was.
func FuzzOpen(f *testing.F) {
	f.Add(uint8(0), uint32(0), []byte{}, uint32(0))                               // nothing damaged
	f.Add(uint8(1), uint32(20), []byte{0xff}, uint32(0))                          // meta page 0
	f.Add(uint8(1), uint32(4096+20), []byte{0x01}, uint32(0))                     // meta page 1
	f.Add(uint8(1), uint32(3*4096+10), []byte{0x00, 0x00}, uint32(0))             // a page's count
	f.Add(uint8(1), uint32(5*4096+600), []byte("garbage"), uint32(0))             // a leaf's records
	f.Add(uint8(1), uint32(0), []byte{}, uint32(9*4096))                          // cut short
	f.Add(uint8(2), uint32(30), []byte{0x40}, uint32(0))                          // a journal entry
	f.Add(uint8(2), uint32(0), []byte{}, uint32(700))                             // a torn journal
	f.Add(uint8(3), uint32(2*4096+16), []byte{9, 0, 0, 0, 0, 0, 0, 0}, uint32(0)) // a branch's page number
	f.Fuzz(func(t *testing.T, which uint8, off uint32, patch []byte, cut uint32) {
		baseOnce.Do(func() { base, baseErr = makeBase(t.TempDir()) })
		if baseErr != nil {
			t.Fatal(baseErr)
		}
		if len(patch) > 512 {
			patch = patch[:512]
		}
		db, journal := bytes.Clone(base.db), bytes.Clone(base.journal)
		damage := func(b []byte) ([]byte, int, int, int) {
			from := int(off % uint32(len(b)))
			to := min(from+len(patch), len(b))
			copy(b[from:to], patch)
			c := len(b)
			if cut > 0 {
				c = int(cut % uint32(len(b)))
			}
			return b[:c], from, to, c
		}
		dbFrom, dbTo, dbCut := 0, 0, len(db)
		jFrom, jTo, jCut := 0, 0, len(journal)
		if which&1 != 0 {
			db, dbFrom, dbTo, dbCut = damage(db)
		}
		if which&2 != 0 {
			journal, jFrom, jTo, jCut = damage(journal)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), db, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, JournalName), journal, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatalf("refused to open a damaged store: %v", err)
		}
		got := make(map[string]Record)
		for _, r := range all(t, s) {
			got[r.ID] = r
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		for id, r := range got {
			written := false
			for _, v := range base.versions[id] {
				written = written || fmt.Sprint(v.Status, v.Text, string(v.Reply)) == fmt.Sprint(r.Status, r.Text, string(r.Reply))
			}
			if !written {
				t.Fatalf("restored %s as %s %q, never written so", id, r.Status, r.Reply)
			}
		}
		for id, want := range base.latest {
			intact := false
			if j, ok := base.inJournal[id]; ok {
				intact = untouched(j, jFrom, jTo, jCut)
			} else {
				for _, c := range base.copies[id] {
					intact = intact || untouched(c, dbFrom, dbTo, dbCut)
				}
			}
			if !intact {
				continue
			}
			r, ok := got[id]
			if !ok {
				t.Fatalf("%s is intact and was not restored", id)
			}
			if r.Status != want.Status || !bytes.Equal(r.Reply, want.Reply) {
				t.Fatalf("%s restored as %s %q, last written as %s %q", id, r.Status, r.Reply, want.Status, want.Reply)
			}
		}
	})
}
