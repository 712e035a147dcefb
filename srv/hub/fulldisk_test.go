//go:build linux || darwin

package hub

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

const fullDirEnv = "AGENTASSISTANT_HUB_FULL_DIR"

// TestFullDiskInChild runs in a child of TestFullDisk, whose files may grow
// no larger than 128 KiB (RLIMIT_FSIZE: a full disk, for real, without
// root).
func TestFullDiskInChild(t *testing.T) {
	dir := os.Getenv(fullDirEnv)
	if dir == "" {
		t.Skip("run by TestFullDisk")
	}
	db, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 128 << 10, Max: 128 << 10}); err != nil {
		t.Fatal(err)
	}
	h := New(Options{Store: db})
	a, b := newFake("a"), newFake("b")
	h.Join("tok", a, nil, Resume{})
	h.Join("tok", b, nil, Resume{})
	big := strings.Repeat("x", 256<<10)

	// A question too big for the disk is refused, and no screen sees it.
	_, err = h.Ask(context.Background(), "tok", Request{Kind: wire.AskQuestion, ID: "big", Text: big, Timeout: time.Minute})
	if !errors.Is(err, ErrNotSaved) || !strings.HasPrefix(err.Error(), "the server cannot save the request: ") {
		t.Fatalf("a question that cannot be saved: %v", err)
	}
	// One that fits is shown.
	rc, ec := ask(h, "tok", "small", time.Minute, context.Background())
	a.waitFor(t, NoteAsked)
	if got := a.cmds(); len(got) != 1 {
		t.Fatalf("screens were shown %v", got)
	}
	// An answer too big for the disk is refused: the agent waits on, no
	// one is told, the question stays pending and can be answered again.
	img := &pb.McpResultContent{Type: 2, Image: &pb.ImageContent{Data: big, MimeType: "image/png"}}
	err = h.Answer(context.Background(), "tok", wire.AskQuestion, "small", Reply{ClientID: "a", Contents: []*pb.McpResultContent{img}})
	if !errors.Is(err, ErrNotSaved) || !strings.HasPrefix(err.Error(), "the server cannot save the answer: ") {
		t.Fatalf("an answer that cannot be saved: %v", err)
	}
	select {
	case r := <-rc:
		t.Fatalf("the agent got an answer that was not saved: %+v", r)
	default:
	}
	if !h.Validity("tok", []string{"small"})["small"] {
		t.Fatal("the question is no longer pending")
	}
	if got := b.cmds(); len(got) != 1 {
		t.Fatalf("another screen was told %v", got)
	}
	if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "small", Reply{ClientID: "a", Nickname: "pc"}); err != nil {
		t.Fatal(err)
	}
	if r := <-rc; r.Nickname != "pc" || <-ec != nil {
		t.Fatalf("reply %+v", r)
	}
	b.waitFor(t, NoteAnswered)
	h.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFullDisk(t *testing.T) {
	dir := t.TempDir()
	// A child that hangs is killed, and fails the test, rather than outlive it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFullDiskInChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), fullDirEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- PASS: TestFullDiskInChild") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	// What was said to be saved is there; what was refused is not.
	db, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got []string
	if err := db.All(func(r store.Record) error { got = append(got, r.ID+"="+r.Status); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "small=answered" {
		t.Fatalf("stored %v, want only small=answered", got)
	}
}
