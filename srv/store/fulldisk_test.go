//go:build linux || darwin

package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

const fullDirEnv = "AGENTASSISTANT_STORE_FULL_DIR"

// fullDisk is what the child reports.
type fullDisk struct {
	Acked, Refused []string
	Err            string
}

// TestFullDiskInChild is the child of TestFullDiskRefusesWhatItCannotSave:
// it opens the store, then limits the size of the files it may write
// (RLIMIT_FSIZE: the disk is full for it, for real, without root) and puts
// records until well past the limit.
func TestFullDiskInChild(t *testing.T) {
	dir := os.Getenv(fullDirEnv)
	if dir == "" {
		t.Skip("run by TestFullDiskRefusesWhatItCannotSave")
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 96 << 10, Max: 96 << 10}); err != nil {
		t.Fatal(err)
	}
	var out fullDisk
	for _, r := range texty(60, 4096) {
		if err := s.Put(r).Wait(); err != nil {
			out.Refused = append(out.Refused, r.ID)
			if out.Err == "" {
				out.Err = err.Error()
			}
			continue
		}
		out.Acked = append(out.Acked, r.ID)
	}
	_ = s.Close() // its last fold fails too: the journal keeps what it has
	b, _ := json.Marshal(out)
	fmt.Printf("FULL: %s\n", b)
}

// A store that cannot write refuses what it cannot save, and everything
// it acknowledged is there after a restart.
func TestFullDiskRefusesWhatItCannotSave(t *testing.T) {
	dir := t.TempDir()
	// A child that hangs is killed, and fails the test, rather than outlive it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFullDiskInChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), fullDirEnv+"="+dir)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, tail(b, 40))
	}
	var got fullDisk
	for l := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "FULL: "); ok {
			if err := json.Unmarshal([]byte(rest), &got); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got.Acked) == 0 || len(got.Refused) == 0 {
		t.Fatalf("acknowledged %d, refused %d: the limit did not bite where it should\n%s", len(got.Acked), len(got.Refused), tail(b, 20))
	}
	if !strings.Contains(got.Err, "file too large") {
		t.Errorf("refused with %q, want the disk's own error", got.Err)
	}
	s := open(t, dir)
	defer s.Close()
	have := make(map[string]bool)
	for _, r := range all(t, s) {
		have[r.ID] = true
	}
	for _, id := range got.Acked {
		if !have[id] {
			t.Errorf("%s was acknowledged and is gone", id)
		}
	}
	for _, id := range got.Refused {
		if have[id] {
			t.Errorf("%s was refused and is there after all", id)
		}
	}
	t.Logf("acknowledged %d, refused %d (%s)", len(got.Acked), len(got.Refused), got.Err)
}
