package channel

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// TestDeliveryErrorsHideURLSecrets: a receiver's URL often is its
// credential (a Home Assistant webhook ID, a chat service's incoming
// webhook token, a ?key= in the query); an error delivering to it, which
// is logged, names the receiver's host and never its path, query or
// user information. So for ntfy's URL.
func TestDeliveryErrorsHideURLSecrets(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close() // nothing listens: the request fails in the transport
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server notices the client leave
		<-r.Context().Done()
	}))
	defer slow.Close()
	const secret = "hook-id-0f3e9c2b7a"
	n := Notice{Event: hub.Event{Kind: hub.Asked, Token: tokA, At: time.Now(), Request: hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?"}}}
	for _, c := range []struct {
		name string
		ch   Channel
		host string
	}{
		{"webhook, connection refused", &Webhook{ID: "ha", URL: "http://" + closed + "/api/webhook/" + secret + "?key=" + secret, Secret: "s3cret-s3cret-s3cret"}, closed},
		{"webhook with user information", &Webhook{ID: "ha", URL: "http://bot:" + secret + "@" + closed + "/hook", Secret: "s3cret-s3cret-s3cret"}, closed},
		{"webhook, timed out", &Webhook{ID: "ha", URL: slow.URL + "/api/webhook/" + secret, Secret: "s3cret-s3cret-s3cret",
			Client: &http.Client{Timeout: 50 * time.Millisecond}}, strings.TrimPrefix(slow.URL, "http://")},
		{"ntfy", &Ntfy{URL: "http://" + closed + "/" + secret + "?auth=" + secret, Topic: "t"}, closed},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.ch.Send(context.Background(), n)
			if err == nil {
				t.Fatal("delivered to nothing")
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error names the URL's secret: %v", err)
			}
			if !strings.Contains(err.Error(), c.host) {
				t.Errorf("the error does not name the receiver %s: %v", c.host, err)
			}
		})
	}
}
