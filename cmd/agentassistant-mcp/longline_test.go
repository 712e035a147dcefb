package main

import (
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// padding reads as n bytes of 'a'.
type padding struct{ n int }

func (p *padding) Read(b []byte) (int, error) {
	if p.n == 0 {
		return 0, io.EOF
	}
	k := min(len(b), p.n)
	for i := range b[:k] {
		b[i] = 'a'
	}
	p.n -= k
	return k, nil
}

// TestLongLineFromClientIsDropped: an MCP client that writes one line of
// 256 MiB on stdin (a runaway argument, a client gone wrong) gets a
// JSON-RPC parse error for it, its next message is served, and
// agentassistant-mcp does not hold the whole line in memory, nor copies
// of it, while it reads it.
func TestLongLineFromClientIsDropped(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Chdir(home)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close() // nothing listens there: only stdio is tried

	const pad = 256 << 20
	stdin := io.MultiReader(
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"`),
		&padding{n: pad},
		strings.NewReader("\"}}\n"+`{"jsonrpc":"2.0","id":2,"method":"ping"}`+"\n"),
	)
	var stdout, stderr syncBuffer
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := run(t.Context(), []string{"-host", "127.0.0.1", "-port", port, "-token", testToken}, stdin, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	runtime.ReadMemStats(&after)

	out := stdout.String()
	if !strings.Contains(out, `"id":2,"result"`) {
		t.Errorf("the message after the long line was not served:\n%.2000s", out)
	}
	if !strings.Contains(out, `"code":-32700`) {
		t.Errorf("the long line got no parse error:\n%.2000s", out)
	}
	if strings.Contains(out, `"id":1,"result"`) {
		t.Errorf("the long line was served whole")
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d MiB reading a line of %d MiB", allocated>>20, pad>>20)
	if allocated > pad/2 {
		t.Errorf("allocated %d MiB reading a line of %d MiB", allocated>>20, pad>>20)
	}
	if !strings.Contains(stderr.String(), "longer than the bound") {
		t.Errorf("stderr does not say a line was dropped:\n%s", stderr.String())
	}
}

// TestLineBound: lines up to the bound pass as they are, a longer one is
// cut at the bound and ended, the rest of it dropped, however the reads
// split the input.
func TestLineBound(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		cut      int
	}{
		{"abc\n", "abc\n", 0},
		{"abcd\n", "abcd\n", 0},
		{"abcde\nxy\n", "abcd\nxy\n", 1},
		{"abcdefghijkl\nxy\n", "abcd\nxy\n", 1},
		{"ab\ncd\n\nabcdefgh", "ab\ncd\n\nabcd\n", 1},
		{"abcdefgh\nabcdefgh\nz", "abcd\nabcd\nz", 2},
		{"", "", 0},
	} {
		for _, split := range []struct {
			name string
			r    func(string) io.Reader
		}{
			{"whole", func(s string) io.Reader { return strings.NewReader(s) }},
			{"bytes", func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) }},
		} {
			cut := 0
			got, err := io.ReadAll(&lineBound{r: split.r(tc.in), max: 4, too: func() { cut++ }})
			if err != nil || string(got) != tc.want {
				t.Errorf("%s %q: got %q, %v; want %q", split.name, tc.in, got, err, tc.want)
			}
			if cut != tc.cut {
				t.Errorf("%s %q: told of %d cut lines, want %d", split.name, tc.in, cut, tc.cut)
			}
		}
	}
}
