package wsconn

import (
	"bytes"
	"testing"

	"github.com/gobwas/ws"
)

// Every length encoding, split at every byte: a prefix asks for more, the
// whole frame parses to its payload.
func TestParseFrameLengths(t *testing.T) {
	for _, size := range []int{0, 1, 7, 8, 9, 125, 126, 127, 65535, 65536, 70000} {
		payload := bytes.Repeat([]byte{0x5a}, size)
		raw := clientFrame(0x82, payload)
		for cut := range len(raw) {
			if cut > 200 && cut < len(raw)-8 {
				continue
			}
			var p parser
			_, n, need, err := p.parse(bytes.Clone(raw[:cut]), 1<<20, false)
			if err != nil || n != 0 || need <= cut || need > len(raw) {
				t.Fatalf("size %d cut %d: n %d need %d err %v", size, cut, n, need, err)
			}
		}
		var p parser
		f, n, _, err := p.parse(append(bytes.Clone(raw), 0x81), 1<<20, false)
		if err != nil || n != len(raw) || !f.fin || f.op != ws.OpBinary || !bytes.Equal(f.payload, payload) {
			t.Fatalf("size %d: n %d err %v", size, n, err)
		}
	}
}

func TestCloseCodes(t *testing.T) {
	for code, ok := range map[int]bool{999: false, 1000: true, 1004: false, 1005: false, 1006: false, 1011: true, 1015: false, 2999: false, 3000: true, 4999: true, 5000: false} {
		_, err := closePayload([]byte{byte(code >> 8), byte(code)})
		if (err == nil) != ok {
			t.Errorf("close code %d: err %v", code, err)
		}
	}
	if code, err := closePayload(nil); err != nil || code != closeNoStatus {
		t.Fatalf("empty close: %d %v", code, err)
	}
}

// Hostile bytes never panic the parser (gobwas/ws's header reader and
// checks, with our limits and fragmentation state), never take more than
// they hold, and never ask for a buffer beyond the limit.
func FuzzParseFrame(f *testing.F) {
	f.Add(clientFrame(0x82, []byte("hello")))
	f.Add(clientFrame(0x02, make([]byte, 300)))
	f.Add([]byte{0x82, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4})
	f.Add(clientFrame(0x88, []byte{0x03, 0xe8, 'o', 'k'}))
	const limit = 4096
	f.Add(append(clientFrame(0x01, []byte("frag")), clientFrame(0x89, nil)...))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p parser
		fragmented := false
		for len(b) > 0 {
			fr, n, need, err := p.parse(b, limit, fragmented)
			if err != nil {
				return
			}
			if n == 0 {
				if need <= len(b) || need > limit+14 {
					t.Fatalf("need %d with %d bytes", need, len(b))
				}
				return
			}
			if n > len(b) || len(fr.payload) > limit {
				t.Fatalf("took %d of %d, payload %d", n, len(b), len(fr.payload))
			}
			switch {
			case fr.op == ws.OpClose:
				_, _ = closePayload(fr.payload)
			case !fr.op.IsControl():
				fragmented = !fr.fin
			}
			b = b[n:]
		}
	})
}
