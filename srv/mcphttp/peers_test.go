package mcphttp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentassistant/agentassistant/mcpbridge"
)

// bus stands for the cluster's NATS subject: a note told by one member
// is heard by every other, before Tell returns.
type bus struct {
	mu    sync.Mutex
	hears map[int]func([]byte)
}

type member struct {
	b *bus
	i int
}

func (m member) Tell(note []byte) {
	m.b.mu.Lock()
	var hs []func([]byte)
	for j, h := range m.b.hears {
		if j != m.i {
			hs = append(hs, h)
		}
	}
	m.b.mu.Unlock()
	for _, h := range hs {
		h(note)
	}
}

func (m member) Listen(hear func([]byte)) (func(), error) {
	m.b.mu.Lock()
	defer m.b.mu.Unlock()
	m.b.hears[m.i] = hear
	return func() {
		m.b.mu.Lock()
		defer m.b.mu.Unlock()
		delete(m.b.hears, m.i)
	}, nil
}

// newPeers serves n Handlers that share a key and tell each other of
// their sessions over a bus.
func newPeers(t *testing.T, n int, be mcpbridge.Backend) (hs []*Handler, bases []string) {
	t.Helper()
	b := &bus{hears: map[int]func([]byte){}}
	for i := range n {
		h := New(Options{MaxSessions: 4, Backend: func(string) mcpbridge.Backend { return be }, SessionKey: sharedKey,
			TokenOf: func(r *http.Request) string { return r.URL.Query().Get("t") }, Peers: member{b, i}})
		ts := httptest.NewServer(h)
		t.Cleanup(func() {
			h.Close()
			ts.Close()
		})
		hs, bases = append(hs, h), append(bases, ts.URL)
	}
	return hs, bases
}

// postIn sends body in session sid to base, and gives the status and the
// response.
func postIn(t *testing.T, base, sid, body string) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(mcpRequest(t, http.MethodPost, base+"?t=token-a", sid, body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// signedNote is a note as an instance tells it, for the room of token.
func signedNote(kind, token, sid string, call json.RawMessage) note {
	room := sha256.Sum256([]byte(token))
	n := note{Kind: kind, Room: hex.EncodeToString(room[:]), Session: sid, Call: call}
	n.MAC = n.sum(deriveKey(sharedKey, noteLabel))
	return n
}

func encodeNote(n note) []byte {
	b, _ := json.Marshal(n)
	return b
}

// TestCancelThroughAnotherInstance: a call waits on one instance; its
// client's notifications/cancelled reaches another one, which tells the
// first: the call ends saying it was cancelled. Before that, a cancel of
// the same JSON-RPC id from another session of the room, and notes that
// are not an instance's (a wrong signature, too large, a session no
// instance made, another room's), leave the call waiting: it gets the
// person's answer.
func TestCancelThroughAnotherInstance(t *testing.T) {
	be := newAsker()
	hs, bases := newPeers(t, 2, be)
	sid := dial(t, bases[0], "token-a", "").GetSessionId()
	other := dial(t, bases[0], "token-a", "").GetSessionId()

	call := func() chan string {
		got := make(chan string, 1)
		go func() {
			_, body := postIn(t, bases[0], sid, askBody)
			got <- body
		}()
		return got
	}
	got := call()
	be.await(func() bool { return len(be.ids) == 1 && be.waiting[be.ids[0]] == 1 })
	if code, body := postIn(t, bases[1], other, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`); code != http.StatusAccepted {
		t.Fatalf("another session's cancel: %d %s", code, body)
	}
	wrong := signedNote(noteCancel, "token-a", sid, json.RawMessage("7"))
	wrong.MAC = signedNote(noteCancel, "token-a", sid, json.RawMessage("8")).MAC
	large := signedNote(noteCancel, "token-a", sid, json.RawMessage("7"))
	large.Call = json.RawMessage(`"` + strings.Repeat("x", maxNote) + `"`)
	large.MAC = large.sum(deriveKey(sharedKey, noteLabel))
	for _, n := range []note{wrong, large,
		signedNote(noteCancel, "token-a", sid+"x", json.RawMessage("7")),
		signedNote(noteCancel, "token-b", sid, json.RawMessage("7")),
	} {
		hs[0].heard(encodeNote(n))
	}
	be.answer(0, "go ahead")
	if body := <-got; !strings.Contains(body, "go ahead") || strings.Contains(body, "cancelled") {
		t.Fatalf("the call cancelled by what does not own it: %s", body)
	}

	got = call()
	be.await(func() bool { return len(be.ids) == 2 && be.waiting[be.ids[1]] == 1 })
	if code, body := postIn(t, bases[1], sid, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"stop"}}`); code != http.StatusAccepted {
		t.Fatalf("the cancel: %d %s", code, body)
	}
	if body := <-got; !strings.Contains(body, "The call was cancelled") {
		t.Fatalf("the call cancelled through another instance: %s", body)
	}
}

// TestEndThroughAnotherInstance: a client ends its session (DELETE) on
// one instance; every instance refuses it from then on, the one that
// served it and the one that never did. A note to end it that is not an
// instance's does nothing.
func TestEndThroughAnotherInstance(t *testing.T) {
	hs, bases := newPeers(t, 3, noServer{})
	sid := dial(t, bases[0], "token-a", "").GetSessionId()
	list := `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
	if code, body := postIn(t, bases[1], sid, list); code != http.StatusOK {
		t.Fatalf("tools/list on another instance: %d %s", code, body)
	}
	bad := signedNote(noteEnd, "token-a", sid, nil)
	bad.MAC = signedNote(noteEnd, "token-b", sid, nil).MAC
	hs[0].heard(encodeNote(bad))
	hs[1].heard(encodeNote(signedNote(noteEnd, "token-b", sid, nil)))
	for i := range 2 {
		if code, body := postIn(t, bases[i], sid, list); code != http.StatusOK {
			t.Fatalf("instance %d after notes that are not an instance's: %d %s", i, code, body)
		}
	}

	resp, err := http.DefaultClient.Do(mcpRequest(t, http.MethodDelete, bases[1]+"?t=token-a", sid, ""))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	for i := range hs {
		if code, _ := postIn(t, bases[i], sid, list); code != http.StatusNotFound {
			t.Errorf("instance %d serves the session its client ended: %d", i, code)
		}
	}
	if _, ss := hs[0].state(); ss["token-a"] != 0 {
		t.Errorf("instance 0 still holds %d sessions", ss["token-a"])
	}
}
