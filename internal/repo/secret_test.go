package repo

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGeneratedSecretsAreKept: a command the documentation (or a deploy
// file's comment) shows never makes a secret for itself alone, as
// "TOKEN=$(openssl rand …) docker compose up -d" does: the token is in
// the environment of that one command, so the reader cannot open the
// web UI or register an agent with it, and running the line again (to
// apply a change) starts the servers with another token, which every
// device and agent then lacks.
func TestGeneratedSecretsAreKept(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../SECURITY.md")
	err = filepath.WalkDir("../../deploy", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	prefix := regexp.MustCompile(`\b[A-Za-z_][A-Za-z0-9_]*=\$\([^)]*\brand\b[^)]*\)[ \t]+[A-Za-z./]`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			if prefix.MatchString(line) {
				t.Errorf("%s:%d makes a secret for one command only, which the reader cannot keep: %s", strings.TrimPrefix(f, "../../"), n+1, strings.TrimSpace(line))
			}
		}
	}
}
