package srv_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/srv"
)

// TestCutBodyEndsTheConnection: a body cut off at the body deadline
// leaves the rest of it unread on the connection, in whatever state it
// was sent. What comes after must never be read as the next request:
// behind a proxy that shares its connections to the server, the rest of
// one client's body would be another request, answered to whoever is
// next (request smuggling); here a client without the token had the
// Connect door serve the request it wrote after a body it never
// finished. Every door closes such a connection after its answer.
func TestCutBodyEndsTheConnection(t *testing.T) {
	_, base := newGuarded(t, srv.Options{BodyTimeout: 200 * time.Millisecond})
	addr := strings.TrimPrefix(base, "http://")
	for _, c := range []struct{ name, path, auth string }{
		{"Connect with the token", "/agentassistproto.SrvAgentAssist/AskQuestion", "Authorization: Bearer " + tokA + "\r\n"},
		{"Connect without a token", "/agentassistproto.SrvAgentAssist/AskQuestion", ""},
		{"Connect with a wrong token", "/agentassistproto.SrvAgentAssist/AskQuestion", "Authorization: Bearer not-a-token-at-all\r\n"},
		{"/mcp", "/mcp", "Authorization: Bearer " + tokA + "\r\n"},
		{"/agui", "/agui", "Authorization: Bearer " + tokA + "\r\n"},
		{"/internal/send", "/internal/send", "Authorization: Bearer " + tokA + "\r\n"},
		{"/push/answer", "/push/answer", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = io.WriteString(conn, "POST "+c.path+" HTTP/1.1\r\nHost: "+addr+"\r\n"+c.auth+
				"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{")
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to the cut body: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			// The rest of the body, as a request of its own.
			if _, err := io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
				return // closed: nothing more is read
			}
			if next, err := http.ReadResponse(br, nil); err == nil {
				next.Body.Close()
				t.Errorf("answered %s to the cut body, then %s to what followed it on the connection", resp.Status, next.Status)
			}
		})
	}
}

// TestLateBodySaysSendAgain: a body that did not arrive by the body
// deadline (a phone on a slow link) is answered 408, saying to send it
// again, on every door that reads a body itself, as /push/answer's is:
// not 400 with the socket's own error ("read tcp 127.0.0.1:…: i/o
// timeout"), which names the server's address and tells the client
// nothing it can do.
func TestLateBodySaysSendAgain(t *testing.T) {
	_, base := newGuarded(t, srv.Options{BodyTimeout: 200 * time.Millisecond})
	addr := strings.TrimPrefix(base, "http://")
	for _, path := range []string{"/mcp", "/agui", "/internal/send"} {
		t.Run(path, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, err = io.WriteString(conn, "POST "+path+" HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer "+tokA+"\r\n"+
				"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{")
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer to the late body: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "send it again") ||
				strings.Contains(string(b), "tcp") || strings.Contains(string(b), "timeout") {
				t.Errorf("answered %s: %s", resp.Status, b)
			}
		})
	}
}

// TestEveryAnswerUnsniffedAndUnreferred: every answer, not only the
// web UI's pages, tells the browser not to guess its type (an error that
// quotes what was sent is text, never a page) and to send no Referer
// from it.
func TestEveryAnswerUnsniffedAndUnreferred(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	for _, path := range []string{"/health", "/push/key", "/api/catalog", "/metrics", "/no-such-route"} {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tokA)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s (%s): X-Content-Type-Options %q, Referrer-Policy %q", path, resp.Status,
				resp.Header.Get("X-Content-Type-Options"), resp.Header.Get("Referrer-Policy"))
		}
	}
}
