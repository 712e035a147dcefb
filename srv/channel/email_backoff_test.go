package channel

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"

	"github.com/agentassistant/agentassistant/internal/pipenet"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// pipeIMAP is an IMAP server (imapmemserver) on an in-memory network,
// for a synctest bubble: it keeps its connections so a test can drop
// them.
type pipeIMAP struct {
	user *imapmemserver.User
	ln   *pipenet.Listener

	mu    sync.Mutex
	conns []net.Conn
}

func newPipeIMAP(t *testing.T) *pipeIMAP {
	mem := imapmemserver.New()
	b := &pipeIMAP{user: imapmemserver.NewUser(aaAddr, imapPass), ln: pipenet.New()}
	if err := b.user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	mem.AddUser(b.user)
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}},
		InsecureAuth: true,
		Logger:       discardLog{},
	})
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(b) }() // ended by Cleanup's Close
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return b
}

func (b *pipeIMAP) Accept() (net.Conn, error) {
	c, err := b.ln.Accept()
	if err == nil {
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.mu.Unlock()
	}
	return c, err
}
func (b *pipeIMAP) Close() error   { return b.ln.Close() }
func (b *pipeIMAP) Addr() net.Addr { return b.ln.Addr() }

// drop closes the connections made so far, as a server going away does.
func (b *pipeIMAP) drop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		_ = c.Close()
	}
	b.conns = nil
}

var waitedRE = regexp.MustCompile(`msg="email: watching the mailbox stopped; trying again".* in=(\S+)`)

// waits are the waits before logging in again the log tells of.
func waits(t *testing.T, logs *syncBuffer) []time.Duration {
	t.Helper()
	var out []time.Duration
	for _, m := range waitedRE.FindAllStringSubmatch(logs.String(), -1) {
		d, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// TestEmailStoreOutageBacksOff: while the store cannot save a reply's
// answer, the watch logs in again waiting longer each time (1s doubling
// up to a minute), not once a second; once the answer is saved, the
// next time the connection drops it waits the first wait again.
func TestEmailStoreOutageBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		box := newPipeIMAP(t)
		logs := &syncBuffer{wake: make(chan struct{}, 1)}
		e := &Email{IMAPAddr: "imap.example.org:143", IMAPUser: aaAddr, IMAPPassword: imapPass, TLS: "none",
			From: "Agent Assistant <" + aaAddr + ">", To: []string{"ana@example.org"},
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), dial: box.ln.Dial}
		shared := newMemShared(t, tokA)
		h := hub.New(hub.Options{Shared: shared})
		shared.hub.Store(h)
		t.Cleanup(h.Close)
		answered := make(chan *hub.Reply, 1)
		go func() { // the agent's call, ended by the answer or by Close
			rep, _ := h.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q-1", Text: "Deploy?", Timeout: time.Hour})
			answered <- rep
		}()
		synctest.Wait()
		id := e.newID()
		if err := e.track(context.Background(), store.Room(tokA)+"\x00q-1", id, asked{Room: store.Room(tokA), Kind: wire.AskQuestion, ID: "q-1", Title: "[agentassistant] Deploy?"}, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		msg := "From: ana@example.org\r\nTo: " + aaAddr + "\r\nSubject: Re: [agentassistant] Deploy?\r\nMessage-ID: <r1@mail.example.org>\r\n" +
			"In-Reply-To: <" + id + ">\r\nContent-Type: text/plain\r\n\r\nShip it.\r\n"
		if _, err := box.user.Append("INBOX", bytes.NewReader([]byte(msg)), &imap.AppendOptions{}); err != nil {
			t.Fatal(err)
		}

		shared.fail.Store(true)
		ctx, cancel := context.WithCancel(context.Background())
		listened := make(chan struct{})
		go func() {
			defer close(listened)
			e.Listen(ctx, Answers{hub: h, tokens: map[string]string{store.Room(tokA): tokA}})
		}()
		defer func() { cancel(); <-listened }()

		time.Sleep(150 * time.Second)
		synctest.Wait()
		got := waits(t, logs)
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
		if len(got) != len(want) {
			t.Fatalf("in 150 s of a store outage the watch logged in again %d times, waiting %v; want %v", len(got), got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("waits %v, want %v", got, want)
			}
		}

		shared.fail.Store(false)
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case rep := <-answered:
			if rep == nil || rep.Contents[0].GetText().GetText() != "Ship it." {
				t.Fatalf("the agent got %+v", rep)
			}
		default:
			t.Fatalf("no answer once the store was back; the log:\n%s", logs.String())
		}

		box.drop()
		synctest.Wait()
		got = waits(t, logs)
		if len(got) != len(want)+1 || got[len(got)-1] != time.Second {
			t.Fatalf("after an answer saved and the connection dropped, waits %v; want the first wait, 1s, last", got)
		}
	})
}

// TestEmailIMAPOverTLS: the watch logs in over implicit TLS and over
// STARTTLS, checking the server's certificate.
func TestEmailIMAPOverTLS(t *testing.T) {
	certs := httptest.NewTLSServer(nil) // for its certificate, for 127.0.0.1
	t.Cleanup(certs.Close)
	roots := certs.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	serverTLS := certs.TLS.Clone()
	serverTLS.NextProtos = nil // HTTP's; an IMAP server names none, or "imap"
	for _, mode := range []string{"tls", "starttls"} {
		t.Run(mode, func(t *testing.T) {
			mem := imapmemserver.New()
			user := imapmemserver.NewUser(aaAddr, imapPass)
			if err := user.Create("INBOX", nil); err != nil {
				t.Fatal(err)
			}
			mem.AddUser(user)
			srv := imapserver.New(&imapserver.Options{
				NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
					return mem.NewSession(), nil, nil
				},
				Caps:      imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIdle: {}},
				TLSConfig: serverTLS,
				Logger:    discardLog{},
			})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			if mode == "tls" {
				ln = tls.NewListener(ln, serverTLS)
			}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { _ = srv.Close() })
			logs := &syncBuffer{wake: make(chan struct{}, 1)}
			e := &Email{IMAPAddr: ln.Addr().String(), IMAPUser: aaAddr, IMAPPassword: imapPass, TLS: mode, TLSConfig: &tls.Config{RootCAs: roots},
				Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); e.Listen(ctx, Answers{}) }()
			logs.waitFor(t, "email: watching the mailbox")
			cancel()
			within(t, "end of Listen after its context", done)
		})
	}
}
