// Package boltfiletest damages a bbolt file the ways the tests of its
// users find it damaged, for the files boltfile.Open sets aside.
package boltfiletest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Damaged runs check, in a subtest each, on a file named name in a
// directory of its own, damaged: junk, or a file write made (sound,
// with something in it, closed) with the pages of its tree overwritten
// past the two meta pages, whose checksums stay good. check opens it as
// its user does; then the damaged file must have been set aside, once.
func Damaged(t *testing.T, name string, write, check func(t *testing.T, dir string)) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string) []byte
	}{
		{"junk", func(*testing.T, string) []byte { return bytes.Repeat([]byte{0xab}, 16<<10) }},
		{"a page overwritten", func(t *testing.T, dir string) []byte {
			write(t, dir)
			b, err := os.ReadFile(filepath.Join(dir, name)) //nolint:gosec // G304: the file the test made in its own directory
			if err != nil {
				t.Fatal(err)
			}
			for i := 2 * os.Getpagesize(); i < len(b); i++ {
				b[i] = 0xab
			}
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, tc.damage(t, dir), 0o600); err != nil {
				t.Fatal(err)
			}
			check(t, dir)
			if aside, _ := filepath.Glob(path + ".damaged-*"); len(aside) != 1 {
				t.Errorf("set aside %v, want the damaged file", aside)
			}
		})
	}
}
