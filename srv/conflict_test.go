package srv_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// conflicting are requests presenting two different valid tokens, each
// in one of the places the HTTP endpoints read a token from: whichever
// of them won, the request would act in a room its client may not have
// meant (a proxy adding its own token beside the client's, say).
var conflicting = []struct {
	name  string
	query string
	set   func(h http.Header)
}{
	{"header and bearer", "", func(h http.Header) {
		h.Set("Authorization", "Bearer "+tokA)
		h.Set(auth.TokenHeader, tokB)
	}},
	{"header and query", "?token=" + tokB, func(h http.Header) { h.Set(auth.TokenHeader, tokA) }},
	{"bearer and query", "?token=" + tokB, func(h http.Header) { h.Set("Authorization", "Bearer "+tokA) }},
	{"two headers", "", func(h http.Header) {
		h.Add(auth.TokenHeader, tokA)
		h.Add(auth.TokenHeader, tokB)
	}},
	{"two bearers", "", func(h http.Header) {
		h.Add("Authorization", "Bearer "+tokA)
		h.Add("Authorization", "Bearer "+tokB)
	}},
	{"two queries", "?token=" + tokA + "&token=" + tokB, func(http.Header) {}},
}

// TestConflictingTokensRefused: an HTTP endpoint that reads the token
// from the X-Agentassistant-Token header, a bearer Authorization header
// or ?token= refuses a request presenting two different tokens (401,
// saying so) before it reads the body: the body of the request below
// never ends, and the answer comes all the same. The same token in two
// places is one token.
func TestConflictingTokensRefused(t *testing.T) {
	// A server that reads the body gives up on it after a second, and
	// answers otherwise than the refusal wanted.
	_, base := newGuarded(t, srv.Options{BodyTimeout: time.Second})
	for _, ep := range []struct{ method, path string }{
		{"POST", "/agui"},
		{"POST", "/mcp"},
		{"GET", "/health"},
		{"GET", "/api/catalog"},
		{"GET", "/internal/sessions/inbox/status"},
		{"POST", "/internal/send"},
	} {
		for _, c := range conflicting {
			pr, pw := io.Pipe()
			go pw.Write([]byte(`{"threadId":"t1","runId":"r1","messages":[`)) // and never more
			var body io.Reader = pr
			if ep.method == "GET" {
				body = nil
			}
			req, _ := http.NewRequest(ep.method, base+ep.path+c.query, body)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			c.set(req.Header)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s, %s: %v", ep.method, ep.path, c.name, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			pw.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "conflicting tokens") {
				t.Errorf("%s %s, %s: %d %.100q, want 401 conflicting tokens", ep.method, ep.path, c.name, resp.StatusCode, b)
			}
		}
	}
	for name, set := range map[string]func(h http.Header){
		"header and bearer": func(h http.Header) {
			h.Set("Authorization", "Bearer "+tokA)
			h.Set(auth.TokenHeader, tokA)
		},
		"two headers": func(h http.Header) {
			h.Add(auth.TokenHeader, tokA)
			h.Add(auth.TokenHeader, tokA)
		},
	} {
		req, _ := http.NewRequest("GET", base+"/health?token="+tokA, nil)
		set(req.Header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the same token in several places (%s and the query): %d, want 200", name, resp.StatusCode)
		}
	}
}

// TestConflictingTokensOnConnect: a Connect call reads the token from
// the message (UserToken, as older clients send it) and from the
// headers; two different tokens among them are refused, unauthenticated
// and saying so, rather than one of them deciding the room.
func TestConflictingTokensOnConnect(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	const path = "/agentassistproto.SrvAgentAssistControl/CancelRequest"
	msg := func(tok string) []byte {
		b, err := proto.Marshal(&pb.CancelRequestRequest{UserToken: tok, ID: "req-1"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name   string
		body   []byte
		header map[string]string
	}{
		{"header and message", msg(tokB), map[string]string{auth.TokenHeader: tokA}},
		{"bearer and message", msg(tokB), map[string]string{"Authorization": "Bearer " + tokA}},
		{"header and bearer", msg(""), map[string]string{auth.TokenHeader: tokA, "Authorization": "Bearer " + tokB}},
	} {
		code, body := postConnect(t, base, path, c.body, c.header)
		if code != http.StatusUnauthorized || !strings.Contains(body, "unauthenticated") || !strings.Contains(body, "conflicting tokens") {
			t.Errorf("%s: %d %s, want 401 unauthenticated, conflicting tokens", c.name, code, body)
		}
	}
	// Authenticated: the call is answered for what it asks (no such
	// request is pending).
	if code, body := postConnect(t, base, path, msg(tokA), map[string]string{auth.TokenHeader: tokA}); code == http.StatusUnauthorized || !strings.Contains(body, "not pending") {
		t.Errorf("the same token in the header and the message: %d %s, want it authenticated", code, body)
	}
}
