package srv_test

import (
	"bytes"
	"crypto/tls"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// TestHTTP2StreamsPerConnectionAreFew: with TLS a client speaks HTTP/2,
// where one connection carries many requests at once, each a goroutine
// and its buffers in the server. The bound on connections that wait for
// nobody (IdleConns) counts connections: a stream whose body never
// comes, to a door that knows its sender only from the body
// (POST /push/answer), or a UI file never read, leaves its connection
// waiting however many such streams it holds. With net/http's 250
// streams a connection, 40 connections from one address held 10,000
// handlers and 100 MB for the body deadline; the 256 one address may
// hold, 64,000 and some 650 MB. The server offers few streams
// (srv.MaxHTTP2Streams) and refuses those beyond, before any handler.
func TestHTTP2StreamsPerConnectionAreFew(t *testing.T) {
	toks, err := auth.NewTokens(tokA, tokB)
	if err != nil {
		t.Fatal(err)
	}
	addr, pool := serveTLS(t, srv.New(srv.Options{Tokens: toks}))
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// A guard against a server that answers nothing, not a measure.
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	offered := uint32(0)
	for offered == 0 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			offered = 1 << 31 // no limit said: unlimited
			if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); ok {
				offered = v
			}
			if err := fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if offered > srv.MaxHTTP2Streams {
		t.Errorf("the server offers %d streams a connection, want at most %d", offered, srv.MaxHTTP2Streams)
	}
	// Streams past what it offers are refused, not served: each opened
	// with a body of one byte of the 1000 it announces.
	const opened = 250
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", addr}, {":path", "/push/answer"},
		{"content-type", "application/json"}, {"content-length", "1000"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := range uint32(opened) {
		id := 2*i + 1
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if err := fr.WriteData(id, false, []byte("{")); err != nil {
			t.Fatal(err)
		}
	}
	want := opened - min(int(offered), opened)
	refused := map[uint32]bool{}
	for len(refused) < want {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("%d of %d streams refused, then %v", len(refused), want, err)
		}
		if rf, ok := f.(*http2.RSTStreamFrame); ok {
			refused[rf.StreamID] = true
		}
	}
	for id := range refused {
		if id <= 2*offered {
			t.Errorf("stream %d refused, within the %d offered", id, offered)
		}
	}
}
