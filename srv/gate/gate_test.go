package gate_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/gate"
	"github.com/agentassistant/agentassistant/srv/wsconn"
)

// door serves a gate.Door whose connections log in with the message
// "login" and echo everything after it.
type door struct {
	d   gate.Door
	url string
}

func newDoor(t *testing.T, pending *auth.Pending, limit int64, wait time.Duration) *door {
	t.Helper()
	d := &door{d: gate.Door{Guard: &auth.Guard{}, Pending: pending, Conns: &wsconn.Set{}, Log: slog.New(slog.DiscardHandler)}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := d.d.Accept(w, r, limit, time.Now().Add(wait))
		if c == nil {
			return
		}
		d.d.Conns.Serve(c, wsconn.Reader{
			Message: func(text bool, data []byte) bool {
				if c.State() < wsconn.Active {
					if string(data) != "login" {
						return false
					}
					c.SetState(wsconn.Active)
					c.SetReadDeadline(time.Now().Add(time.Hour))
				}
				return c.Send(append([]byte("re:"), data...))
			},
			Timeout: func() { c.Shutdown(wsconn.ClosePolicyViolation, "login timeout") },
		})
	}))
	t.Cleanup(func() {
		d.d.Conns.Close()
		srv.Close()
	})
	d.url = "ws" + strings.TrimPrefix(srv.URL, "http")
	return d
}

func (d *door) dial(t *testing.T, h http.Header) *websocket.Conn {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(d.url, h)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// closeOf reads ws until it ends and returns the close frame's code and
// text.
func closeOf(t *testing.T, ws *websocket.Conn) (int, string) {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Text
		}
		if err != nil {
			t.Fatalf("ended without a close frame: %v", err)
		}
	}
}

// waitFor waits until cond holds, or fails after a bound no passing run
// comes near.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
	}
}

func TestForeignOriginRefusedBeforeAPlace(t *testing.T) {
	p := auth.NewPending(4, 4)
	d := newDoor(t, p, 1024, time.Minute)
	_, resp, err := websocket.DefaultDialer.Dial(d.url, http.Header{"Origin": {"https://evil.example"}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a page of another site: %v %v", resp, err)
	}
	if p.Len() != 0 {
		t.Errorf("a refused origin holds %d places", p.Len())
	}
}

func TestNoHandshakeGivesThePlaceBack(t *testing.T) {
	p := auth.NewPending(4, 4)
	d := newDoor(t, p, 1024, time.Minute)
	resp, err := http.Get("http" + strings.TrimPrefix(d.url, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a GET without the handshake: %d", resp.StatusCode)
	}
	// The refusal is written before the place is given back.
	waitFor(t, "a refused upgrade's place given back", func() bool { return p.Len() == 0 })
}

func TestReadLimitBeforeTheToken(t *testing.T) {
	d := newDoor(t, auth.NewPending(4, 4), 16, time.Minute)
	ws := d.dial(t, nil)
	if err := ws.WriteMessage(websocket.BinaryMessage, make([]byte, 17)); err != nil {
		t.Fatal(err)
	}
	if code, _ := closeOf(t, ws); code != wsconn.CloseTooBig {
		t.Errorf("a frame over the limit before the token: close %d", code)
	}
}

func TestDeadlineBeforeTheToken(t *testing.T) {
	d := newDoor(t, auth.NewPending(4, 4), 1024, 50*time.Millisecond)
	ws := d.dial(t, nil)
	if code, text := closeOf(t, ws); code != wsconn.ClosePolicyViolation || text != "login timeout" {
		t.Errorf("silent past the deadline: close %d %q", code, text)
	}
}

func TestNewcomerEvictsTheOldestWaiting(t *testing.T) {
	p := auth.NewPending(1, 1)
	d := newDoor(t, p, 1024, time.Minute)
	first := d.dial(t, nil)
	second := d.dial(t, nil)
	if code, text := closeOf(t, first); code != wsconn.CloseTryAgainLater || text != wsconn.EvictText {
		t.Errorf("the oldest waiting: close %d %q", code, text)
	}
	if err := second.WriteMessage(websocket.TextMessage, []byte("login")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := second.ReadMessage(); err != nil || string(b) != "re:login" {
		t.Fatalf("the newcomer: %q %v", b, err)
	}
	// Logged in, it gives its place back.
	waitFor(t, "the logged-in connection's place given back", func() bool { return p.Len() == 0 })
	third := d.dial(t, nil)
	if err := second.WriteMessage(websocket.TextMessage, []byte("still here")); err != nil {
		t.Fatal(err)
	}
	if _, b, err := second.ReadMessage(); err != nil || string(b) != "re:still here" {
		t.Errorf("a logged-in connection after a newcomer came: %q %v", b, err)
	}
	_ = third.Close()
}

func TestClosedSetTakesNoConnection(t *testing.T) {
	p := auth.NewPending(4, 4)
	d := newDoor(t, p, 1024, time.Minute)
	d.d.Conns.Close()
	ws := d.dial(t, nil)
	if code, _ := closeOf(t, ws); code != wsconn.CloseNormal {
		t.Errorf("a connection to a closed door: close %d", code)
	}
	waitFor(t, "the dropped connection's place given back", func() bool { return p.Len() == 0 })
}
