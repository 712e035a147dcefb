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
