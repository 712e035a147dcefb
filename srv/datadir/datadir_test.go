package datadir

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// snapshot is every file under dir with its contents.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			files[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		files[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func format(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNewDirectoryGetsTheCurrentFormat(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	found, err := Prepare(dir, "v9.9.9", nil)
	if err != nil || found != 0 {
		t.Fatalf("Prepare = %d, %v", found, err)
	}
	if got := format(t, dir); got != "2\nwritten by agentassistant-srv v9.9.9\n" {
		t.Errorf("FORMAT = %q", got)
	}
}

// TestFormat1IsUpgraded: a directory the server wrote before FORMAT
// existed is format 1; it is brought to 2 with every file as it was.
func TestFormat1IsUpgraded(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	found, err := Prepare(dir, "v2.0.0", nil)
	if err != nil || found != 1 {
		t.Fatalf("Prepare = %d, %v", found, err)
	}
	after := snapshot(t, dir)
	if !strings.HasPrefix(after[FileName], "2\n") {
		t.Errorf("FORMAT = %q", after[FileName])
	}
	delete(after, FileName)
	if !maps.Equal(before, after) {
		t.Errorf("files changed: %v, then %v", before, after)
	}
	if found, err := Prepare(dir, "v2.0.1", nil); err != nil || found != Current {
		t.Errorf("second Prepare = %d, %v", found, err)
	}
	if got := format(t, dir); !strings.Contains(got, "v2.0.0") {
		t.Errorf("a current directory was written again: %q", got)
	}
}

// TestNewerFormatIsRefused: an older binary given a directory a newer one
// wrote says which build it needs, and changes nothing.
func TestNewerFormatIsRefused(t *testing.T) {
	for name, tc := range map[string]struct{ file, need string }{
		"with writer":    {"3\nwritten by agentassistant-srv v3.1.0\n", "it needs agentassistant-srv v3.1.0 or newer"},
		"without writer": {"7\n", "it needs a newer agentassistant-srv"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for f, b := range map[string]string{FileName: tc.file, "token": "tok\n", "agentassistant.db": "db"} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(b), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			before := snapshot(t, dir)
			_, err := Prepare(dir, "v2.0.0", nil)
			var newer *NewerError
			if !errors.As(err, &newer) {
				t.Fatalf("Prepare = %v, want a NewerError", err)
			}
			for _, want := range []string{"format " + strings.SplitN(tc.file, "\n", 2)[0], "(v2.0.0)", tc.need, "nothing was changed"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if after := snapshot(t, dir); !maps.Equal(before, after) {
				t.Errorf("files changed: %v, then %v", before, after)
			}
		})
	}
}

func TestUnreadableFormatIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	if _, err := Prepare(dir, "v2.0.0", nil); err == nil || !strings.Contains(err.Error(), "does not start with its format number") {
		t.Errorf("Prepare = %v", err)
	}
	if after := snapshot(t, dir); !maps.Equal(before, after) {
		t.Errorf("files changed")
	}
}
