package cluster

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// pushOpened is what a device reads of a push.
type pushOpened struct{ Type, ID string }

// openPush decrypts body, an RFC 8291 aes128gcm message (one record) to
// the device of key and auth.
func openPushBody(t *testing.T, key *ecdh.PrivateKey, auth, body []byte) pushOpened {
	t.Helper()
	if len(body) < 21 || len(body) < 21+int(body[20]) {
		t.Fatalf("a push of %d bytes", len(body))
	}
	salt, idlen := body[:16], int(body[20])
	_ = binary.BigEndian.Uint32(body[16:20]) // record size: one record
	asPub, err := ecdh.P256().NewPublicKey(body[21 : 21+idlen])
	if err != nil {
		t.Fatal(err)
	}
	secret, err := key.ECDH(asPub)
	if err != nil {
		t.Fatal(err)
	}
	info := append(append([]byte("WebPush: info\x00"), key.PublicKey().Bytes()...), asPub.Bytes()...)
	ikm, err := hkdf.Key(sha256.New, secret, auth, string(info), 32)
	if err != nil {
		t.Fatal(err)
	}
	cek, _ := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: aes128gcm\x00", 16)
	nonce, _ := hkdf.Key(sha256.New, ikm, salt, "Content-Encoding: nonce\x00", 12)
	block, _ := aes.NewCipher(cek)
	gcm, _ := cipher.NewGCM(block)
	plain, err := gcm.Open(nil, nonce, body[21+idlen:], nil)
	if err != nil {
		t.Fatalf("the push does not open: %v", err)
	}
	plain = bytes.TrimRight(plain, "\x00")
	plain = plain[:len(plain)-1] // the last record's delimiter
	var m pushOpened
	if err := json.Unmarshal(plain, &m); err != nil {
		t.Fatalf("plaintext %q: %v", plain, err)
	}
	return m
}

// TestClosedOnceWhenSettledOnAnotherInstanceDuringItsPush: a question
// asked on A is answered on B while A pushes it to a device. B's close
// may reach the push service before A's ask or after it; either way
// the device gets one close of it, after the ask: never a second (a
// push that closes nothing counts against the browser's budget of
// silent pushes), never none.
func TestClosedOnceWhenSettledOnAnotherInstanceDuringItsPush(t *testing.T) {
	closedOnceRound(t, false)
}

// TestClosedOnceWhenSettledElsewhereDuringAPushCut: as above, but the
// ask's push is cut (the push service took it whole, and its answer came
// too late): the asker, which would push it again, finds it settled and
// pushes no ask; it pushes the close it was left (the device may show
// the question), and only it.
func TestClosedOnceWhenSettledElsewhereDuringAPushCut(t *testing.T) {
	closedOnceRound(t, true)
}

// closedOnceRound: a question asked on A is answered on B while A pushes
// it, its push cut when cut; the device gets one close of it, after the
// ask.
func closedOnceRound(t *testing.T, cut bool) {
	var a, b *instance
	// B's settle has reached B's Pusher (a subscriber after it).
	settledOnB := make(chan struct{})
	p := newPushPair(t, func(r *http.Request, m pushOpened) {
		if m.Type == "ask" && m.ID == "q-1" {
			// Answered on B as A pushes it, and heard on A before its
			// push returns.
			if err := b.hub.Answer(context.Background(), tok, wire.AskQuestion, "q-1", reply("pc", "yes")); err != nil {
				t.Error(err)
			}
			<-settledOnB
			eventually(t, "A hears q-1 settled", func() bool { _, _, waits := a.hub.Waiting(tok, "q-1"); return !waits })
			if cut {
				<-r.Context().Done() // A gave up waiting for the answer
			}
		}
	})
	a, b = p.a, p.b
	oa, ob := p.oa, p.ob
	if cut {
		oa.Client = &http.Client{Transport: p.svc.Client().Transport, Timeout: 500 * time.Millisecond}
		oa.Backoff = time.Millisecond
	}
	pusher(t, a, oa)
	pusher(t, b, ob)
	t.Cleanup(b.hub.Subscribe(func(ev hub.Event) {
		if ev.Kind != hub.Asked && ev.Request.ID == "q-1" {
			close(settledOnB)
		}
	}))
	p.subscribe()

	wait(t, ask(context.Background(), a, question("q-1", "Deploy?")))
	p.seen("q-1", func(_, closes int) bool { return closes > 0 })
	// Asked once every close of q-1 is queued, on either instance: once
	// both are pushed, every close of q-1 is in.
	ask(context.Background(), a, question("q-2", "Ship?"))
	ask(context.Background(), b, question("q-3", "Merge?"))
	var closes int
	all := p.seen("q-1", func(asks, n int) bool { closes = n; return asks == 2 })
	if closes != 1 || all[0] != (pushOpened{"ask", "q-1"}) || all[1] != (pushOpened{"settled", "q-1"}) {
		t.Fatalf("the device got %v: %d closes of q-1, want one, after its ask", all, closes)
	}
}
