package push

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// TestPublicAddresses: the addresses a push may connect to are the
// public ones; this machine's, a private network's, link-local (the
// cloud's metadata service), CGNAT, unspecified and multicast ones are
// not, however they are written.
func TestPublicAddresses(t *testing.T) {
	for _, c := range []struct {
		addr   string
		public bool
	}{
		{"142.250.74.106", true}, // fcm.googleapis.com
		{"34.117.59.81", true},
		{"2a00:1450:4001:82b::200a", true},
		{"100.63.255.255", true}, // just below CGNAT
		{"100.128.0.0", true},    // just above it
		{"127.0.0.1", false},
		{"127.8.9.10", false},
		{"::1", false},
		{"::ffff:127.0.0.1", false}, // IPv4 in IPv6
		{"10.0.0.1", false},
		{"172.16.5.4", false},
		{"192.168.1.20", false},
		{"::ffff:192.168.1.20", false},
		{"fd00::1", false},
		{"fc00::1", false},
		{"169.254.169.254", false}, // a cloud's metadata service
		{"fe80::1", false},
		{"100.64.0.1", false}, // CGNAT (a tailnet's addresses too)
		{"100.127.255.254", false},
		{"0.0.0.0", false},
		{"0.1.2.3", false}, // "this network"
		{"::", false},
		{"224.0.0.1", false},
		{"239.255.255.250", false},
		{"ff02::1", false},
		{"255.255.255.255", false},
		{"64:ff9b::a00:1", false},    // NAT64 of 10.0.0.1
		{"64:ff9b::8efa:4a6a", true}, // NAT64 of a public one
	} {
		if got := publicAddr(netip.MustParseAddr(c.addr)); got != c.public {
			t.Errorf("%s: public %v, want %v", c.addr, got, c.public)
		}
	}
}

// TestSubscriptionsNamePublicServices: an endpoint at an address of this
// machine or a private network is refused at subscribe, with 400 and
// why, unless the server is told to allow them (a push service of one's
// own, and tests).
func TestSubscriptionsNamePublicServices(t *testing.T) {
	f := newFixture(t, Options{})
	good := newDevice(t, "/x")
	keys := `"keys":{"p256dh":"` + base64.RawURLEncoding.EncodeToString(good.key.PublicKey().Bytes()) +
		`","auth":"` + base64.RawURLEncoding.EncodeToString(good.auth) + `"}`
	subscribe := func(endpoint string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		f.p.Subscribe(tokA).ServeHTTP(rec, httptest.NewRequest("POST", "/push/subscriptions",
			strings.NewReader(`{"endpoint":"`+endpoint+`",`+keys+`}`)))
		return rec
	}
	private := []string{
		"https://127.0.0.1:8080/x", "https://[::1]/x", "https://10.1.2.3/x", "https://169.254.169.254/latest/meta-data",
		"https://[fd00::1]/x", "https://100.64.1.2/x", "https://0.0.0.0/x", "https://localhost:9000/x",
		"https://api.localhost/x", "https://[::ffff:10.0.0.1]/x",
	}
	f.p.o.AllowPrivateEndpoints = false
	for _, e := range private {
		if rec := subscribe(e); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "public") {
			t.Errorf("%s: %d %s, want 400 saying it must be public", e, rec.Code, rec.Body)
		}
	}
	for _, e := range []string{"https://fcm.googleapis.com/fcm/send/abc", "https://updates.push.services.mozilla.com/wpush/v2/abc", "https://142.250.74.106/x"} {
		if rec := subscribe(e); rec.Code != http.StatusCreated {
			t.Errorf("%s: %d %s, want 201", e, rec.Code, rec.Body)
		}
	}
	f.p.o.AllowPrivateEndpoints = true
	for _, e := range private {
		if rec := subscribe(e); rec.Code != http.StatusCreated {
			t.Errorf("allowed, %s: %d %s, want 201", e, rec.Code, rec.Body)
		}
	}
}

// TestSubscriptionsNameNoAddressInDisguise: an IPv4 address written
// another way (one number, octal or hex parts, parts left out: what
// inet_aton and browsers read as 127.0.0.1) is an address, not a name,
// and is refused at subscribe as the address it spells would be; so is
// an address with a zone. A push service is a name (or an address as
// written canonically, checked as such).
func TestSubscriptionsNameNoAddressInDisguise(t *testing.T) {
	for _, host := range []string{"2130706433", "0177.0.0.1", "127.1", "0x7f.1", "0x7F000001", "127.0.0.01", "10.1", "169.254.43518",
		"example.0x1", "example.123", "127.0.0.1.", "[fe80::1%25eth0]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:127.0.0.1]"} {
		if why := endpointHost(hostOf(t, "https://"+host+":443/x")); why == "" {
			t.Errorf("%s: taken as a push service", host)
		}
	}
	for _, host := range []string{"fcm.googleapis.com", "updates.push.services.mozilla.com", "142.250.74.106", "web.push.apple.com.",
		"1e100.net", "0x.example", "123abc.example"} {
		if why := endpointHost(hostOf(t, "https://"+host+"/x")); why != "" {
			t.Errorf("%s: refused: %s", host, why)
		}
	}
}

func hostOf(t *testing.T, endpoint string) string {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatalf("%s: %v", endpoint, err)
	}
	return u.Hostname()
}

// notDelivered is a log handler that tells which subscriptions' pushes
// were given up, once the line is written.
type notDelivered struct {
	slog.Handler
	got chan string
}

func (notDelivered) Enabled(context.Context, slog.Level) bool { return true }

func (h notDelivered) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Message == "push not delivered" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				h.got <- a.Value.String()
			}
			return true
		})
	}
	return err
}

// TestDeliveryConnectsToPublicAddressesOnly: a subscription kept with an
// endpoint of this machine (one made before the check, or a name that
// resolves there only now: DNS rebinding) gets no push: the address is
// checked as it is connected to, after the name is resolved. Allowed,
// the same pushes arrive.
func TestDeliveryConnectsToPublicAddressesOnly(t *testing.T) {
	for _, allow := range []bool{false, true} {
		s := newService(t)
		dir := t.TempDir()
		keys, _ := LoadOrCreateKeys(dir)
		subs, _ := OpenFileSubscriptions(dir)
		h := hub.New(hub.Options{})
		t.Cleanup(h.Close)
		logs := notDelivered{Handler: slog.DiscardHandler, got: make(chan string, 8)}
		p := New(Options{Hub: h, Subscriptions: subs, Keys: keys, AllowHTTP: true, Tries: 1,
			AllowPrivateEndpoints: allow, Logger: slog.New(logs)})
		t.Cleanup(p.Close)
		port := s.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
		d := newDevice(t, "/")
		k := base64.RawURLEncoding.EncodeToString(d.key.PublicKey().Bytes())
		a := base64.RawURLEncoding.EncodeToString(d.auth)
		for i, host := range []string{"127.0.0.1", "localhost"} {
			_ = subs.Put(store.Room(tokA), Subscription{ID: host, Endpoint: "http://" + host + ":" + strconv.Itoa(int(port)) + "/" + host,
				P256dh: k, Auth: a, Device: "device " + strconv.Itoa(i)})
		}
		go func() {
			_, _ = h.Ask(t.Context(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q", Text: "?", Timeout: time.Hour})
		}()
		if allow {
			s.waitFor(t, "/127.0.0.1", 1)
			s.waitFor(t, "/localhost", 1)
			continue
		}
		for range 2 {
			select {
			case err := <-logs.got:
				if !strings.Contains(err, "not a public address") {
					t.Errorf("refused for %q", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no push was given up")
			}
		}
		s.mu.Lock()
		n := len(s.got)
		s.mu.Unlock()
		if n != 0 {
			t.Errorf("the push service on this machine was pushed to: %v", s.got)
		}
	}
}

// TestRedirectsAreNotFollowed: a push service answers a push (RFC 8030:
// 201), it does not send it elsewhere. One that redirects is not
// followed, to another path, host or scheme (a subscription must be
// https, a redirect could name http): the push is not delivered, saying
// what the service answered, and the place it named gets nothing.
func TestRedirectsAreNotFollowed(t *testing.T) {
	landed := make(chan struct{}, 8)
	mux := http.NewServeMux()
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/landed", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/landed", func(w http.ResponseWriter, _ *http.Request) {
		landed <- struct{}{}
		w.WriteHeader(http.StatusCreated)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	dir := t.TempDir()
	keys, _ := LoadOrCreateKeys(dir)
	subs, _ := OpenFileSubscriptions(dir)
	h := hub.New(hub.Options{})
	t.Cleanup(h.Close)
	logs := notDelivered{Handler: slog.DiscardHandler, got: make(chan string, 8)}
	// The default client, as the server has it; the double is on this
	// machine, over plain http.
	p := New(Options{Hub: h, Subscriptions: subs, Keys: keys, AllowHTTP: true, AllowPrivateEndpoints: true, Tries: 1,
		Logger: slog.New(logs)})
	t.Cleanup(p.Close)
	d := newDevice(t, "/moved")
	_ = subs.Put(store.Room(tokA), Subscription{ID: "moved", Endpoint: s.URL + "/moved",
		P256dh: base64.RawURLEncoding.EncodeToString(d.key.PublicKey().Bytes()),
		Auth:   base64.RawURLEncoding.EncodeToString(d.auth), Device: "phone"})
	go func() {
		_, _ = h.Ask(t.Context(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q", Text: "?", Timeout: time.Hour})
	}()
	select {
	case err := <-logs.got:
		if !strings.Contains(err, "307") {
			t.Errorf("not delivered for %q, want the service's 307", err)
		}
	case <-landed:
		t.Fatal("the redirect was followed: the push went where it pointed")
	case <-time.After(10 * time.Second): // only against a hang
		t.Fatal("the push was neither delivered nor given up")
	}
	if len(landed) != 0 {
		t.Error("the redirect was followed: the push went where it pointed")
	}
}

// TestLogHoldsNoEndpoint: a push's endpoint is the browser's address at
// its push service, whose path is the subscription's own secret (FCM's
// registration token): whoever has it may push to the device. A push
// not delivered is logged with its subscription's ID and the service's
// host, never the endpoint's path.
func TestLogHoldsNoEndpoint(t *testing.T) {
	const secret = "fcm-registration-f00dfeedcafe"
	s := newService(t)
	dir := t.TempDir()
	keys, _ := LoadOrCreateKeys(dir)
	subs, _ := OpenFileSubscriptions(dir)
	h := hub.New(hub.Options{})
	t.Cleanup(h.Close)
	var out lockedBuffer
	logs := notDelivered{Handler: slog.NewTextHandler(&out, nil), got: make(chan string, 8)}
	p := New(Options{Hub: h, Subscriptions: subs, Keys: keys, AllowHTTP: true, Tries: 1, Logger: slog.New(logs)})
	t.Cleanup(p.Close)
	d := newDevice(t, "/")
	// This machine's address: the push is refused as it connects.
	_ = subs.Put(store.Room(tokA), Subscription{ID: "sub-1", Endpoint: s.URL + "/wp/" + secret + "?k=" + secret,
		P256dh: base64.RawURLEncoding.EncodeToString(d.key.PublicKey().Bytes()),
		Auth:   base64.RawURLEncoding.EncodeToString(d.auth), Device: "phone"})
	go func() {
		_, _ = h.Ask(t.Context(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q", Text: "?", Timeout: time.Hour})
	}()
	select {
	case err := <-logs.got:
		if !strings.Contains(err, hostOf(t, s.URL)) || !strings.Contains(err, "not a public address") {
			t.Errorf("not delivered for %q, want the service's host and why", err)
		}
	case <-time.After(10 * time.Second): // only against a hang
		t.Fatal("the push was not given up")
	}
	if strings.Contains(out.String(), secret) {
		t.Errorf("the log holds the endpoint's secret:\n%s", out.String())
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDeliveryReachesNoAddressOfThisMachine: an address of this
// machine's own interfaces reaches its services however public it is (a
// server's public IPv4, this machine's global IPv6): a push connects to
// none of them. Only what is on loopback was refused: a subscription
// naming this machine's public address had the server POST to its own
// services there.
func TestDeliveryReachesNoAddressOfThisMachine(t *testing.T) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			t.Fatal(err)
		}
		addr := netip.AddrPortFrom(p.Addr(), 443).String()
		if err := dialPublic("tcp", addr, nil); !errors.Is(err, errPrivate) {
			t.Errorf("a push may connect to %s, an address of this machine: %v", addr, err)
		}
		if why := endpointHost(p.Addr().String()); why == "" {
			t.Errorf("a subscription may name %s, an address of this machine", p.Addr())
		}
	}
}
