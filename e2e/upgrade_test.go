package e2e

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/datadir"
	"github.com/agentassistant/agentassistant/srv/store"
	"google.golang.org/protobuf/proto"
)

// format1Dir is a data directory as the server wrote it before its format
// had a number (format 1), made with that server: two questions still
// pending (their agents take missed answers), one answered, a study
// session's log, the generated token, the inbox pages' cards.
const format1Dir = "testdata/datadir-format1"

// copyTree copies the directory src to a new one and returns it.
func copyTree(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "data")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// tree is every file under dir with its contents.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		files[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// records reads the request store of dir.
func records(t *testing.T, dir string) map[string]store.Record {
	t.Helper()
	db, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	recs := map[string]store.Record{}
	if err := db.All(func(r store.Record) error { recs[r.ID] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	return recs
}

// postpone sets the deadline of every pending request in the store of
// dir to at, through the store: the questions of a directory made on a
// given day still wait when the test runs later.
func postpone(t *testing.T, dir string, at time.Time) {
	t.Helper()
	db, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pending []store.Record
	if err := db.All(func(r store.Record) error {
		if r.Status == store.Pending {
			pending = append(pending, r)
		}
		return nil
	}); err != nil || len(pending) == 0 {
		t.Fatalf("the pending questions of %s: %d, %v", dir, len(pending), err)
	}
	for _, r := range pending {
		r.Deadline = at
		if err := db.Put(r).Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFormat1DirectoryUpgrades: this server started on a directory the
// previous format's server wrote upgrades it to the current format and
// loses nothing: the token (every device stays logged in), the pending
// questions, the answer, the study log.
func TestFormat1DirectoryUpgrades(t *testing.T) {
	orig := tree(t, format1Dir)
	data := copyTree(t, format1Dir)
	// The questions were asked when the directory was made, with a day
	// to wait: their deadlines move to a day from now (the test ran a day
	// after the directory was made), and the history must keep them
	// however long ago they were asked.
	postpone(t, data, time.Now().Add(24*time.Hour))
	cfg := filepath.Join(t.TempDir(), "keep.toml")
	if err := os.WriteFile(cfg, []byte("[requests]\nhistory = \"876000h\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerWith(t, freePort(t), data, []string{"-config", cfg})
	if s.Token != strings.TrimSpace(orig["token"]) {
		t.Errorf("the server uses token %q, not the one kept in the directory", s.Token)
	}
	dial(t, s, s.Token, "pc") // the token still logs a device in
	s.stopCleanly(t)
	if !strings.Contains(s.logw.String(), "data directory upgraded") {
		t.Errorf("the server did not say it upgraded the directory:\n%s", s.logw.String())
	}

	after := tree(t, data)
	if !strings.HasPrefix(after[datadir.FileName], "2\n") {
		t.Errorf("FORMAT = %q, want format 2", after[datadir.FileName])
	}
	for _, f := range []string{"token", "logs/study/s-20261127-001.jsonl"} {
		if after[f] != orig[f] {
			t.Errorf("%s changed:\n%s\nnow:\n%s", f, orig[f], after[f])
		}
	}
	recs := records(t, data)
	for id, text := range map[string]string{"format1-pending-1": "Which database for the shop?", "format1-pending-2": "Ship on Friday?"} {
		if r, ok := recs[id]; !ok || r.Status != store.Pending || r.Text != text {
			t.Errorf("pending question %s is now %+v", id, r)
		}
	}
	r, ok := recs["format1-answered"]
	var reply pb.AskQuestionResponse
	if !ok || r.Status != store.Answered || proto.Unmarshal(r.Reply, &reply) != nil ||
		len(reply.GetContents()) == 0 || reply.GetContents()[0].GetText().GetText() != "Tabs, as gofmt does." {
		t.Errorf("the answered question is now %+v (%v)", r, &reply)
	}
	if len(recs) != 3 {
		t.Errorf("the store holds %d requests, want 3", len(recs))
	}
}

// TestNewerDirectoryRefused: given a directory a newer server wrote, this
// one says which version it needs, exits, and changes nothing.
func TestNewerDirectoryRefused(t *testing.T) {
	data := copyTree(t, format1Dir)
	if err := os.WriteFile(filepath.Join(data, datadir.FileName), []byte("3\nwritten by agentassistant-srv v9.1.0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := tree(t, data)
	// A server that does not refuse runs on: the context ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "agentassistant-srv"), "-port", "0", "-data", data)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"HOME=" + cmd.Dir, "XDG_CONFIG_HOME=" + cmd.Dir}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "is in format 3") ||
		!strings.Contains(string(out), "it needs agentassistant-srv v9.1.0 or newer; nothing was changed") {
		t.Fatalf("the server ran on a newer directory: %v\n%s", err, out)
	}
	if after := tree(t, data); !maps.Equal(before, after) {
		t.Errorf("the refused directory changed")
	}
}
