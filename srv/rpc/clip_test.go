package rpc

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestClip: a name an agent gives (its own, its model's, its MCP
// client's, an answering device's) is shown as one line of text that
// reads as what it is, at most maxNameLen bytes of valid UTF-8.
func TestClip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "Claude Code", "Claude Code"},
		{"trimmed", "  cursor \t", "cursor"},
		{"control characters", "gpt\x00-5\x1b[2J\x7f\u0085", "gpt-5[2J"},
		{"line and paragraph separators", "one\u2028two\u2029\nthree", "onetwothree"},
		{"bidirectional controls", "\u202eevil\u2066 name\u200e", "evil name"},
		{"at the limit", strings.Repeat("a", maxNameLen), strings.Repeat("a", maxNameLen)},
		{"over the limit", strings.Repeat("a", maxNameLen+1), strings.Repeat("a", maxNameLen)},
		// The cut falls inside the 65th é: the half is dropped.
		{"cut inside a character", "x" + strings.Repeat("é", 64), "x" + strings.Repeat("é", 63)},
		{"nothing left", "\n\u202e ", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := clip(tc.in)
			if got != tc.want {
				t.Errorf("clip(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if len(got) > maxNameLen || !utf8.ValidString(got) {
				t.Errorf("clip(%q) = %q: %d bytes, valid %v", tc.in, got, len(got), utf8.ValidString(got))
			}
		})
	}
}
