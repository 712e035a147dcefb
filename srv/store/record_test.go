package store

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"
)

// layout3 is what the store wrote before its record became a generated
// message (the hand-written encoder, layout "3"), for the records of
// layout3Records: a store on disk today holds these bytes.
var layout3 = []string{
	"010a203366326139633064356536623761383139306131623263336434653566363031121a30314a5451385a3659334b344d354e3650375138523953305431180422082f7372632f6170702a16536869702069743f20e29c9320e587bae8b4a7e5909730b00938aab4aab08bd0b7ab3140aaf4f5dc81f3b7ab314a08616e73776572656452070a05000102ff8058aa84d7a39ad0b7ab31620862792070686f6e656a05636f646572720a736f6d652d6d6f64656c7a0d616e204d435020636c69656e74a506a6ce9426",
	"010a027231120161180222082f7372632f6170702a0c536869702069743f20e29c9330b00938aab4aab08bd0b7ab3140aaf4f5dc81f3b7ab314a0770656e64696e67a506daf25e86",
	"010a0272ff120369006418012a0cfeff20626164207574662d38300538f1c7afa02540024a0774696d656f757458808080808080cab5ee01620178a50696136130",
	"010a017212017aa506c083334c",
}

func layout3Records() []Record {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)
	return []Record{
		{Room: "3f2a9c0d5e6b7a8190a1b2c3d4e5f601", ID: "01JTQ8Z6Y3K4M5N6P7Q8R9S0T1", Kind: 2, ProjectDirectory: "/src/app",
			Text: "Ship it? ✓ 出货吗", TimeoutSeconds: 600, CreatedAt: t0, Deadline: t0.Add(10 * time.Minute), Status: Answered,
			Reply: []byte{0x0a, 0x05, 0, 1, 2, 0xff, 0x80}, ClosedAt: t0.Add(2 * time.Second), ClosedNote: "by phone",
			AgentName: "coder", ReasoningModelName: "some-model", McpClientName: "an MCP client"},
		{Room: "r1", ID: "a", Kind: 1, ProjectDirectory: "/src/app", Text: "Ship it? ✓",
			TimeoutSeconds: 600, CreatedAt: t0, Deadline: t0.Add(10 * time.Minute), Status: Pending},
		// Not UTF-8, negative numbers, a time before 1970: kept as they came.
		{Room: "r\xff", ID: "i\x00d", Kind: -1, Text: "\xfe\xff bad utf-8", TimeoutSeconds: -3,
			CreatedAt: time.Unix(-5, 7), Deadline: time.Unix(0, 1), Status: TimedOut, ClosedAt: time.Unix(1<<33, 0), ClosedNote: "x"},
		{Room: "r", ID: "z"},
	}
}

func layout3Bytes(t testing.TB, i int) []byte {
	b, err := hex.DecodeString(layout3[i])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Records on disk in layout "3" decode to what was stored, with their
// checksum.
func TestLayout3Decodes(t *testing.T) {
	for i, want := range layout3Records() {
		var got Record
		summed, err := decodeSummed(layout3Bytes(t, i), &got)
		if err != nil || !summed {
			t.Fatalf("record %d: summed %v, %v", i, summed, err)
		}
		same(t, got, want)
	}
}

// The encoder writes layout "3" byte for byte: records written now read
// the same in an earlier server, and a record rewritten unchanged is the
// same bytes.
func TestEncodeIsLayout3(t *testing.T) {
	for i, r := range layout3Records() {
		if got, want := encode(&r), layout3Bytes(t, i); !bytes.Equal(got, want) {
			t.Fatalf("record %d:\n got %x\nwant %x", i, got, want)
		}
	}
}

// A record of the second layout (no checksum) still decodes, as one
// without; the same bytes with anything after the checksum, or a damaged
// checksum, do not.
func TestChecksumLastAndSound(t *testing.T) {
	v := layout3Bytes(t, 0)
	var r Record
	if summed, err := decodeSummed(v[:len(v)-6], &r); err != nil || summed {
		t.Fatalf("without its checksum: summed %v, %v; want a record of the second layout", summed, err)
	}
	same(t, r, func() Record { r := layout3Records()[0]; return r }())
	for name, b := range map[string][]byte{
		"a field after the checksum": append(append([]byte(nil), v...), 0x08, 0x01),
		"a byte after the checksum":  append(append([]byte(nil), v...), 0),
		"a damaged checksum":         append(append([]byte(nil), v[:len(v)-1]...), v[len(v)-1]^1),
		"a damaged text":             append(append([]byte{}, v[:60]...), append([]byte{v[60] ^ 1}, v[61:]...)...),
		"two checksums":              append(append([]byte(nil), v[:len(v)-6]...), append(v[len(v)-6:], v[len(v)-6:]...)...),
		"no format byte":             v[1:],
	} {
		if err := decode(b, &r); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func BenchmarkRecordCodec(b *testing.B) {
	lockorder.Pause(b)
	r := layout3Records()[0]
	b.ReportAllocs()
	for b.Loop() {
		var got Record
		if err := decode(encode(&r), &got); err != nil {
			b.Fatal(err)
		}
	}
}

// A key holds the creation time as 16 hex digits of Unix nanoseconds,
// zero-padded, between the room and the ID: what stores already on disk
// hold, so their records sort and are found as before.
func TestKeyLayout(t *testing.T) {
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{time.Unix(0, 0), "room/0000000000000000/id"},
		{time.Unix(0, 0xabc), "room/0000000000000abc/id"},
		{time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), fmt.Sprintf("room/%016x/id", time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC).UnixNano())},
		{time.Unix(-5, 0), "room/0000000000000000/id"},
		{time.Unix(0, math.MaxInt64).Add(time.Hour), "room/7fffffffffffffff/id"},
	} {
		r := Record{Room: "room", ID: "id", CreatedAt: c.at}
		if got := string(r.Key()); got != c.want {
			t.Errorf("%v: key %q, want %q", c.at, got, c.want)
		}
	}
}
