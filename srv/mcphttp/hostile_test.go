package mcphttp

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/agentassistant/agentassistant/mcpbridge"
)

// TestHostileInitializeStillSigned: whatever a client's initialize
// says (a name and version of characters JSON escapes six bytes apiece,
// control and bidirectional characters, every standard capability and
// huge experimental ones, the longest relay session name), the signed
// ID it is given is one every instance reads back: within maxSignedID,
// with what it claims the same as what was signed. An ID past the bound
// would serve on its own instance only, and 404 on the others.
func TestHostileInitializeStillSigned(t *testing.T) {
	key := deriveKey(sharedKey, sessionIDLabel)
	relay := strings.Repeat("r", 64)
	for name, info := range map[string][3]string{
		"escaped":  {strings.Repeat("<", 200), strings.Repeat("\x01", 100), strings.Repeat("&", 50)},
		"controls": {strings.Repeat("\u202e\u2028\n", 60), strings.Repeat("\u0085", 50), "2025-06-18\r\n"},
		"quotes":   {strings.Repeat(`"\`, 100), strings.Repeat(`"`, 100), strings.Repeat(`\`, 50)},
	} {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
			"protocolVersion": info[2],
			"clientInfo":      map[string]any{"name": info[0], "version": info[1]},
			"capabilities": map[string]any{
				"roots": map[string]any{"listChanged": true}, "sampling": map[string]any{"context": map[string]any{}, "tools": map[string]any{}},
				"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}},
				"tasks": map[string]any{"list": map[string]any{}, "cancel": map[string]any{}, "requests": map[string]any{
					"tools": map[string]any{"call": map[string]any{}}, "sampling": map[string]any{"createMessage": map[string]any{}},
					"elicitation": map[string]any{"create": map[string]any{}}}},
				"experimental": map[string]any{"x": strings.Repeat("<", 4000)},
			}}})
		sid := sign(key, "token-a", claimsOf(relay, body))
		if len(sid) > maxSignedID {
			t.Errorf("%s: the ID is %d bytes, over the %d every instance reads", name, len(sid), maxSignedID)
		}
		c, err := verify(key, "token-a", sid)
		if err != nil || c.Relay != relay || c.Capabilities.Elicitation == nil || c.Capabilities.Elicitation.Form == nil {
			t.Errorf("%s: read back as %+v, %v", name, c, err)
		}
		for _, s := range []string{c.Client.Name, c.Client.Version, c.Version} {
			if !utf8.ValidString(s) || strings.ContainsAny(s, "\n\r\x01\u0085\u2028\u202e") {
				t.Errorf("%s: the ID claims %q", name, s)
			}
		}
	}
}

// TestAdoptionNotEvicted: a session being taken over (its client's
// initialize replayed) by a stream (GET), which does not make it busy,
// does not make way for a new session meanwhile. If it did, the replay
// would put it back in the table past the bound (the transport holds
// it), and a token holder racing streams against initializes would grow
// its table without end.
func TestAdoptionNotEvicted(t *testing.T) {
	h := New(Options{Backend: func(string) mcpbridge.Backend { return noServer{} }, MaxSessions: 1, SessionKey: sharedKey,
		TokenOf: func(*http.Request) string { return "token-a" }})
	t.Cleanup(h.Close)
	sid := sign(h.key, "token-a", claims{Relay: DefaultRelaySession, Version: "2025-06-18", Nonce: "n"})
	listen := &stream{end: func() {}}
	b, s, victim, adopt, code := h.enter("token-a", DefaultRelaySession, sid, "http://x", listen, false)
	if code != 0 || !adopt || victim != nil {
		t.Fatalf("a stream with a valid ID: code %d, adopt %v", code, adopt)
	}
	// An initialize while the adoption runs.
	if _, _, victim, _, code := h.enter("token-a", DefaultRelaySession, "", "http://x", nil, true); victim == s || code != http.StatusServiceUnavailable {
		t.Errorf("an initialize during the adoption: code %d, the session adopted made way: %v", code, victim == s)
	}
	if !h.adopt(s) {
		t.Fatal("the adoption failed")
	}
	h.leave(b, s, listen)
	if _, ss := h.state(); ss["token-a"] != 1 {
		t.Errorf("the table holds %v sessions, bound 1", ss)
	}
}

// TestSignedClaimsOfOtherTypes: an ID signed with the cluster's key
// whose claims are JSON of other types (another version's, say) is read
// as no session: 404, nothing put in the table.
func TestSignedClaimsOfOtherTypes(t *testing.T) {
	hs, bases, _ := newInstances(t, 1, 4, nil)
	key := deriveKey(sharedKey, sessionIDLabel)
	for _, payload := range []string{`{"s":5}`, `{"s":"default","c":[]}`, `{"s":"default","i":{"name":{}}}`,
		`{"s":"default","v":null,"c":null,"i":null,"n":7}`, `[]`, `null`, `"default"`, `{"s":["default"]}`, `{}`} {
		p := base64.RawURLEncoding.EncodeToString([]byte(payload))
		sid := signedPrefix + p + "." + base64.RawURLEncoding.EncodeToString(mac(key, sha256.Sum256([]byte("token-a")), p))
		if got := post(t, bases[0]+"?", "token-a", sid); got != http.StatusNotFound {
			t.Errorf("claims %s: %d, want 404", payload, got)
		}
	}
	if _, ss := hs[0].state(); ss["token-a"] != 0 {
		t.Errorf("the table holds %v sessions", ss)
	}
}

// TestAdoptionRacingDelete: a session's first request on an instance
// and its client's DELETE arrive together, in either order: once both
// are done the session is ended there (404), and the table holds none.
func TestAdoptionRacingDelete(t *testing.T) {
	hs, bases, _ := newInstances(t, 1, 4, nil)
	key := deriveKey(sharedKey, sessionIDLabel)
	for i := range 20 {
		sid := sign(key, "token-a", claims{Relay: DefaultRelaySession, Version: "2025-11-25", Nonce: strconv.Itoa(i)})
		var wg sync.WaitGroup
		wg.Go(func() { post(t, bases[0]+"?", "token-a", sid) })
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodDelete, bases[0]+"?t=token-a", nil)
			req.Header.Set("Mcp-Session-Id", sid)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		})
		wg.Wait()
		if got := post(t, bases[0]+"?", "token-a", sid); got != http.StatusNotFound {
			t.Errorf("race %d: after DELETE, %d", i, got)
		}
	}
	if _, ss := hs[0].state(); ss["token-a"] != 0 {
		t.Errorf("the table holds %v sessions", ss)
	}
}

// TestInitializeInASessionRefused: an initialize sent with a session's
// ID, known or signed by the cluster, opens no session past the bound.
// The transport would mint a new one for it outside the table's bound
// (and, in a cluster, a random one no other instance serves): a token
// holder repeating it grew the table without end. It is refused as the
// official SDK refuses it, 400 with Invalid Request, and the session
// goes on.
func TestInitializeInASessionRefused(t *testing.T) {
	for _, key := range [][]byte{nil, sharedKey} {
		h := New(Options{Backend: func(string) mcpbridge.Backend { return noServer{} }, MaxSessions: 2, SessionKey: key,
			TokenOf: func(r *http.Request) string { return r.URL.Query().Get("t") }})
		ts := httptest.NewServer(h)
		t.Cleanup(func() {
			h.Close()
			ts.Close()
		})
		c := dial(t, ts.URL, "token-a", "")
		sids := []string{c.GetSessionId()}
		if key != nil {
			sids = append(sids, sign(deriveKey(key, sessionIDLabel), "token-a", claims{Relay: DefaultRelaySession, Version: "2025-06-18", Nonce: "n"}))
		}
		for _, sid := range sids {
			for range 5 {
				req, _ := http.NewRequest(http.MethodPost, ts.URL+"?t=token-a", strings.NewReader(
					`{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
				req.Header.Set("Mcp-Session-Id", sid)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var msg struct {
					ID    int `json:"id"`
					Error struct {
						Code int `json:"code"`
					} `json:"error"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&msg)
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest || msg.ID != 7 || msg.Error.Code != invalidRequest || resp.Header.Get("Mcp-Session-Id") != "" {
					t.Errorf("key %v: an initialize in a session: %d, %+v, session %q", key != nil, resp.StatusCode, msg, resp.Header.Get("Mcp-Session-Id"))
				}
			}
		}
		if _, ss := h.state(); ss["token-a"] > 2 {
			t.Errorf("key %v: the table holds %v sessions, bound 2", key != nil, ss)
		}
		if _, err := c.ListTools(context.Background(), mcp.ListToolsRequest{}); err != nil {
			t.Errorf("key %v: the session after: %v", key != nil, err)
		}
	}
}
