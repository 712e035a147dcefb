package hub

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Requests the store found lost are told to their room's devices, and
// only theirs, until one dismisses them: then every device of the room
// is sent what is left, and the store forgets them.
func TestLostToldUntilDismissed(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for _, r := range []store.Record{
		{Room: store.Room("tok"), ID: "q1", Kind: int(wire.AskQuestion), ProjectDirectory: "/home/me/shop", Text: "?", CreatedAt: t0, Deadline: t0.Add(time.Hour), Status: store.Pending},
		{Room: store.Room("other"), ID: "q2", Kind: int(wire.TaskFinish), ProjectDirectory: "/srv/infra", Text: "done", CreatedAt: t0, Deadline: t0.Add(time.Hour), Status: store.Pending},
	} {
		if err := db.Put(r).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, store.FileName)); err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := New(Options{Store: db})
	defer h.Close()
	if _, _, err := h.Restore([]string{"tok", "third"}); err != nil {
		t.Fatal(err)
	}
	if f := h.Lost("third"); f != nil {
		t.Fatalf("a room that lost nothing is told %v", f)
	}
	f := h.Lost("tok")
	if ls := f.Lost; f.Kind != NoteLost || len(ls) != 1 || ls[0].ID != "q1" ||
		ls[0].ProjectDirectory != "/home/me/shop" || wire.Kind(ls[0].Kind) != wire.AskQuestion {
		t.Fatalf("told %v", f)
	}
	pc, phone := newFake("pc"), newFake("phone")
	h.Join("tok", pc, nil, Resume{})
	h.Join("tok", phone, nil, Resume{})
	if err := h.DismissLost("tok", []string{"q1"}); err != nil {
		t.Fatal(err)
	}
	if m := phone.waitFor(t, NoteLost); len(m.Lost) != 0 {
		t.Fatalf("after the dismissal the room is sent %v", m)
	}
	if f := h.Lost("tok"); f != nil {
		t.Fatalf("told again after the dismissal: %v", f)
	}
	if ls := db.Lost(); len(ls) != 1 || ls[0].ID != "q2" {
		t.Fatalf("the store still keeps %v; want only the other token's", ls)
	}
}
