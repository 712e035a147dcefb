package store

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// TestHistoryPageBounded: a page of the history is bounded by its bytes,
// not only its count. An answer may carry 16 MiB of images and the
// question 16 MiB of text, and a page was up to 200 of them, read,
// decoded and sent as one /ws frame: a token's holder who had answered
// many with big images made the server build gigabytes for one
// GetHistory (and a frame larger than a device's send queue drops the
// device). Past HistoryPageBytes the page ends early, saying there is
// more; one record larger than that still comes, alone; paging on
// reaches every record.
func TestHistoryPageBounded(t *testing.T) {
	s := open(t, t.TempDir())
	defer s.Close()
	t0 := time.Now().Add(-time.Hour)
	const n, each = 10, HistoryPageBytes * 3 / 8
	for i := range n {
		r := sample("r", fmt.Sprint("s", i), t0.Add(time.Duration(i)*time.Minute))
		r.Status, r.ClosedAt, r.Reply = Answered, r.CreatedAt.Add(time.Second), bytes.Repeat([]byte{byte('a' + i)}, each)
		s.Put(r)
	}
	before, seen := time.Now(), 0
	for page := 0; ; page++ {
		got, more, err := s.History("r", before, 200)
		if err != nil {
			t.Fatal(err)
		}
		var size int
		for _, r := range got {
			size += len(r.Text) + len(r.Reply) + len(r.Questions)
		}
		if size > HistoryPageBytes {
			t.Fatalf("page %d holds %d records, %d bytes, past %d", page, len(got), size, HistoryPageBytes)
		}
		seen += len(got)
		if !more {
			break
		}
		if len(got) == 0 {
			t.Fatal("an empty page says there is more")
		}
		before = got[len(got)-1].CreatedAt
	}
	if seen != n {
		t.Errorf("paging reached %d records, want %d", seen, n)
	}

	huge := sample("r", "huge", t0.Add(time.Hour-time.Second))
	huge.Status, huge.ClosedAt, huge.Reply = Answered, huge.CreatedAt, bytes.Repeat([]byte{'h'}, HistoryPageBytes+1)
	s.Put(huge)
	got, more, err := s.History("r", time.Now(), 200)
	if err != nil || len(got) != 1 || got[0].ID != "huge" || !more {
		t.Errorf("a record past the bound: %d records (%v), more %v, err %v; want it alone, and more", len(got), ids(got), more, err)
	}
}
