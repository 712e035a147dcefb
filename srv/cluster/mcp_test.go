package cluster

import (
	"context"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/natstest"
)

// TestHeardOnce: a note heard twice (on the subject and from the
// bucket) is handed on once; one heard before the last mcpHeard is
// forgotten, so the set stays bounded.
func TestHeardOnce(t *testing.T) {
	s := newHeardSet(3)
	sum := func(b byte) [sha256.Size]byte { return sha256.Sum256([]byte{b}) }
	for _, b := range []byte{1, 2, 3} {
		if !s.add(sum(b)) {
			t.Fatalf("note %d is new, not heard", b)
		}
	}
	if s.add(sum(2)) {
		t.Fatal("note 2 heard twice")
	}
	if !s.add(sum(4)) { // 1 makes way
		t.Fatal("note 4 is new")
	}
	if !s.add(sum(1)) {
		t.Fatal("note 1, forgotten, is not heard again")
	}
	if s.add(sum(4)) || s.add(sum(3)) {
		t.Fatal("a note among the last three heard twice")
	}
	if len(s.seen) != 3 || len(s.ring) != 3 {
		t.Fatalf("the set holds %d (%d in its ring), not 3", len(s.seen), len(s.ring))
	}
}

// TestMCPNoteValue: a kept note's value gives back its teller and the
// note; one with no teller's name is none.
func TestMCPNoteValue(t *testing.T) {
	from, note := splitMCPNote(mcpNoteValue("b", []byte(`{"k":"end"}`)))
	if from != "b" || string(note) != `{"k":"end"}` {
		t.Fatalf("got %q %q", from, note)
	}
	if _, note := splitMCPNote([]byte(`{"k":"end"}`)); note != nil {
		t.Fatalf("a value with no teller gave %q", note)
	}
}

// TestMCPNotesOfAnEarlierRun: an instance restarted under its name (as
// docs/cluster.md advises) hears the notes its previous run told: a
// session its client ended there stays ended. Its own notes of this run
// it does not hear back.
func TestMCPNotesOfAnEarlierRun(t *testing.T) {
	ns := natstest.Start(t)
	open := func() *Cluster {
		c, err := Open(context.Background(), Options{URL: ns.URL(), Tokens: []string{tok}, Instance: "a"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := open()
	before.MCP().Tell([]byte(`{"k":"end","n":1}`))
	if err := before.Close(); err != nil {
		t.Fatal(err)
	}

	after := open()
	defer after.Close()
	heard := make(chan string, 4)
	stop, err := after.MCP().Listen(func(note []byte) { heard <- string(note) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	select {
	case n := <-heard:
		if n != `{"k":"end","n":1}` {
			t.Fatalf("heard %s", n)
		}
	default: // Listen returns once the kept notes are heard
		t.Fatal("a note of this instance's previous run is not heard after a restart")
	}
	after.MCP().Tell([]byte(`{"k":"end","n":2}`))
	// A note of another instance kept after it, heard only from the
	// bucket, so in the bucket's order: once it is heard, the one before
	// it was skipped or heard.
	third := []byte(`{"k":"end","n":3}`)
	if _, err := after.mcpNotes.Put(context.Background(), mcpNoteKey(third), mcpNoteValue("b", third)); err != nil {
		t.Fatal(err)
	}
	if n := <-heard; n != string(third) {
		t.Fatalf("a run heard its own note %s", n)
	}
	later := open() // a later run hears them all
	defer later.Close()
	got := make(chan string, 4)
	stop2, err := later.MCP().Listen(func(note []byte) { got <- string(note) })
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	if len(got) != 3 {
		t.Fatalf("a later run heard %d kept notes, want 3", len(got))
	}
}

// TestMCPRunGone: a run that hears the relayed events is there for the
// other instances; once its connection is gone (its process killed:
// the connection closed without a word) or it stops hearing them, it is
// known gone at once. A name no run could have is not asked about.
func TestMCPRunGone(t *testing.T) {
	ns := natstest.Start(t)
	open := func(name string) *Cluster {
		c, err := Open(context.Background(), Options{URL: ns.URL(), Tokens: []string{tok}, Instance: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a, b, c := open("a"), open("b"), open("c")
	ctx := context.Background()
	// The NATS server drops a closed connection's interest on its own
	// goroutine: a question sent before that is lost, and asked again
	// (as mcphttp asks while it waits).
	gone := func(run string) bool {
		for range 20 {
			qctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			g := b.MCP().Gone(qctx, run)
			cancel()
			if g {
				return true
			}
		}
		return false
	}
	stopA, err := a.MCP().Receive(func([]byte) {})
	if err != nil {
		t.Fatal(err)
	}
	defer stopA()
	stopC, err := c.MCP().Receive(func([]byte) {})
	if err != nil {
		t.Fatal(err)
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if b.MCP().Gone(qctx, a.MCP().Run()) || b.MCP().Gone(qctx, c.MCP().Run()) {
		t.Fatal("a run that hears the relayed events is counted gone")
	}
	a.nc.Close() // as kill -9 leaves it
	if !gone(a.MCP().Run()) {
		t.Fatal("a run whose connection is gone is not counted gone")
	}
	stopC()
	if !gone(c.MCP().Run()) {
		t.Fatal("a run that stopped hearing the relayed events is not counted gone")
	}
	for _, run := range []string{"", "aa.>", "a b", "AB", strings.Repeat("a", maxRun+1)} {
		if b.MCP().Gone(qctx, run) {
			t.Fatalf("%q, no run's name, is counted gone", run)
		}
	}
}
