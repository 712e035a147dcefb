package push

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/store"
)

// service is a push service double, written from RFC 8030: it takes a
// POST per push on the subscription's endpoint and answers 201, or what
// status says for the n-th request of a path.
type service struct {
	*httptest.Server
	mu     sync.Mutex
	got    map[string][]*http.Request // by path
	bodies map[*http.Request][]byte
	status func(path string, n int) int
	hold   chan struct{} // a path under /hang/ waits for it
	wake   chan struct{}
}

func newService(t *testing.T) *service {
	s := &service{got: map[string][]*http.Request{}, bodies: map[*http.Request][]byte{}, hold: make(chan struct{}), wake: make(chan struct{}, 1000)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.HasPrefix(r.URL.Path, "/hang/") {
			<-s.hold
		}
		s.mu.Lock()
		s.got[r.URL.Path] = append(s.got[r.URL.Path], r)
		s.bodies[r] = b
		n := len(s.got[r.URL.Path])
		st := s.status
		s.mu.Unlock()
		code := http.StatusCreated
		if st != nil {
			code = st(r.URL.Path, n)
		}
		w.WriteHeader(code)
		s.wake <- struct{}{}
	}))
	t.Cleanup(func() {
		select {
		case <-s.hold:
		default:
			close(s.hold)
		}
		s.Close()
	})
	return s
}

// waitFor waits until path has had n pushes, and returns them.
func (s *service) waitFor(t *testing.T, path string, n int) []*http.Request {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		got := append([]*http.Request(nil), s.got[path]...)
		s.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-s.wake:
		case <-deadline:
			t.Fatalf("%s had %d pushes, want %d", path, len(got), n)
		}
	}
}

// device is a browser's side of a subscription: its key pair and secret.
type device struct {
	key  *ecdh.PrivateKey
	auth []byte
	path string
}

func newDevice(t *testing.T, path string) *device {
	key, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	return &device{key: key, auth: auth, path: path}
}

// subscribe posts the device's subscription for token, as the app does.
func (d *device) subscribe(t *testing.T, p *Pusher, s *service, token, name string, replies ...string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"endpoint": s.URL + d.path,
		"keys": map[string]string{"p256dh": base64.RawURLEncoding.EncodeToString(d.key.PublicKey().Bytes()),
			"auth": base64.RawURLEncoding.EncodeToString(d.auth)},
		"device": name, "replies": replies,
	})
	rec := httptest.NewRecorder()
	p.Subscribe(token).ServeHTTP(rec, httptest.NewRequest("POST", "/push/subscriptions", bytes.NewReader(body)))
	if rec.Code != http.StatusCreated {
		t.Fatalf("subscribe: %d %s", rec.Code, rec.Body)
	}
	var out struct{ ID string }
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return out.ID
}

// opened is a push as the device reads it.
type opened struct {
	msg   message
	raw   string
	vapid map[string]any
	k     string
}

// open decrypts and checks r with npm's http_ece and jws (testdata/open.mjs).
func (d *device) open(t *testing.T, s *service, r *http.Request) opened {
	t.Helper()
	modules, _ := filepath.Abs("../../web/node_modules")
	if _, err := os.Stat(filepath.Join(modules, "http_ece")); err != nil {
		t.Skip("web/node_modules has no http_ece: run `cd web && npm ci` (make test does)")
	}
	s.mu.Lock()
	body := s.bodies[r]
	s.mu.Unlock()
	in, _ := json.Marshal(map[string]any{
		"body": base64.StdEncoding.EncodeToString(body), "authorization": r.Header.Get("Authorization"),
		"priv": map[string]string{"d": base64.RawURLEncoding.EncodeToString(d.key.Bytes())},
		"auth": base64.RawURLEncoding.EncodeToString(d.auth),
	})
	cmd := exec.Command("node", "testdata/open.mjs")
	cmd.Env = append(os.Environ(), "WEB_MODULES="+modules)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var res struct {
		Plaintext string
		Vapid     map[string]any
		K         string
		Error     string
	}
	if err := json.Unmarshal(out, &res); err != nil || res.Error != "" {
		t.Fatalf("the push does not open: %v %s", err, res.Error)
	}
	var m message
	if err := json.Unmarshal([]byte(res.Plaintext), &m); err != nil {
		t.Fatalf("plaintext %q: %v", res.Plaintext, err)
	}
	return opened{msg: m, raw: res.Plaintext, vapid: res.Vapid, k: res.K}
}

type fixture struct {
	hub  *hub.Hub
	caps *answercap.Store
	p    *Pusher
	s    *service
	keys Keys
	subs *FileSubscriptions
	dir  string
}

// keysAndSubs are the VAPID keys and subscriptions kept in dir.
func keysAndSubs(t *testing.T, dir string) (Keys, *FileSubscriptions) {
	t.Helper()
	keys, err := LoadOrCreateKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	subs, err := OpenFileSubscriptions(dir)
	if err != nil {
		t.Fatal(err)
	}
	return keys, subs
}

func newFixture(t *testing.T, o Options) *fixture {
	t.Helper()
	dir := t.TempDir()
	keys, subs := keysAndSubs(t, dir)
	h := hub.New(hub.Options{})
	t.Cleanup(h.Close)
	s := newService(t)
	caps := answercap.New()
	t.Cleanup(caps.Follow(h, store.Room))
	// The double is on this machine, over plain http.
	o.Hub, o.Subscriptions, o.Keys, o.AllowHTTP, o.AllowPrivateEndpoints, o.Subject, o.Caps = h, subs, keys, true, true, "mailto:ops@example.org", caps
	if o.Client == nil {
		o.Client = s.Client()
	}
	p := New(o)
	t.Cleanup(p.Close)
	return &fixture{hub: h, caps: caps, p: p, s: s, keys: keys, subs: subs, dir: dir}
}

// ask asks token's room a question and returns where its answer comes.
func (f *fixture) ask(token, id, text string) chan *hub.Reply {
	out := make(chan *hub.Reply, 1)
	go func() {
		rep, _ := f.hub.Ask(context.Background(), token, hub.Request{Kind: wire.AskQuestion, ID: id, Text: text,
			ProjectDirectory: "/home/ana/shop", AgentName: "Claude Code", Timeout: time.Hour})
		out <- rep
	}()
	return out
}

const tokA, tokB = "token-a-0123456789abcdef", "token-b-0123456789abcdef"

// TestPushToEveryDeviceAndAnswerFromIt: a question reaches every
// subscribed device of its token, and only those, encrypted so that the
// device's keys open it (npm's http_ece), signed so that the server's
// VAPID key verifies it (npm's jws); it shows the project, the agent,
// the start of the text and the person's replies, never the token. An
// action's capability answers the question once; the other device is
// then told to close its notification (the same Topic), and the used or
// voided capability answers nothing more.
func TestPushToEveryDeviceAndAnswerFromIt(t *testing.T) {
	f := newFixture(t, Options{})
	phone, laptop, other := newDevice(t, "/phone"), newDevice(t, "/laptop"), newDevice(t, "/other")
	phone.subscribe(t, f.p, f.s, tokA, "Pixel 8 · Chrome", "Yes", "No", "Go ahead", "Stop and wait")
	laptop.subscribe(t, f.p, f.s, tokA, "Laptop · Firefox")
	other.subscribe(t, f.p, f.s, tokB, "Someone else's phone")

	answered := f.ask(tokA, "q-1", "**Deploy** the `shop` to production now?\nIt has 3 migrations.")
	r := f.s.waitFor(t, "/phone", 1)[0]
	f.s.waitFor(t, "/laptop", 1)
	got := phone.open(t, f.s, r)
	m := got.msg
	if m.Type != "ask" || m.ID != "q-1" || m.Title != "shop · Claude Code asks" || m.Body != "Deploy the shop to production now? It has 3 migrations." {
		t.Errorf("message = %+v", m)
	}
	if strings.Join(m.Actions, "|") != "Yes|No|Go ahead" || m.Cap == "" || m.Answer != "/push/answer" {
		t.Errorf("actions %v, cap %q, answer %q", m.Actions, m.Cap, m.Answer)
	}
	for _, h := range []string{r.Header.Get("Authorization"), got.raw} {
		if strings.Contains(h, tokA) {
			t.Error("a push carries the token")
		}
	}
	if got.k != f.keys.Public || got.vapid["aud"] != f.s.URL || got.vapid["sub"] != "mailto:ops@example.org" {
		t.Errorf("VAPID: k %q, claims %v", got.k, got.vapid)
	}
	if r.Header.Get("Content-Encoding") != "aes128gcm" || r.Header.Get("Urgency") != "high" || r.Header.Get("Topic") != m.Tag || r.Header.Get("TTL") == "" {
		t.Errorf("headers: %v", r.Header)
	}

	answer := func(capName, text string) int {
		b, _ := json.Marshal(map[string]string{"cap": capName, "text": text})
		rec := httptest.NewRecorder()
		f.caps.Answer(f.hub, time.Now, slog.New(slog.DiscardHandler), func(*http.Request) {}).ServeHTTP(rec, httptest.NewRequest("POST", "/push/answer", bytes.NewReader(b)))
		return rec.Code
	}
	if code := answer(m.Cap, "Yes"); code != http.StatusOK {
		t.Fatalf("answer: %d", code)
	}
	rep := <-answered
	if rep == nil || rep.Contents[0].GetText().GetText() != "Yes" || rep.Nickname != "Pixel 8 · Chrome" {
		t.Fatalf("the agent got %+v", rep)
	}
	settled := laptop.open(t, f.s, f.s.waitFor(t, "/laptop", 2)[1])
	if settled.msg.Type != "settled" || settled.msg.Tag != m.Tag || settled.msg.Outcome != "Answered on Pixel 8 · Chrome" {
		t.Errorf("settled push = %+v", settled.msg)
	}
	if code := answer(m.Cap, "No"); code != http.StatusGone {
		t.Errorf("the capability again: %d, want 410", code)
	}
	laptopAsk := laptop.open(t, f.s, f.s.waitFor(t, "/laptop", 1)[0])
	if code := answer(laptopAsk.msg.Cap, "No"); code != http.StatusGone {
		t.Errorf("the other device's capability after the answer: %d, want 410", code)
	}
	if code := answer("made-up", "No"); code != http.StatusGone {
		t.Errorf("a made-up capability: %d, want 410", code)
	}
	f.s.mu.Lock()
	n := len(f.s.got["/other"])
	f.s.mu.Unlock()
	if n != 0 {
		t.Errorf("another token's device got %d pushes", n)
	}
}

// TestGoneSubscriptionIsRemoved: a push service that calls a
// subscription gone (410, or 404) has it removed, on disk too.
func TestGoneSubscriptionIsRemoved(t *testing.T) {
	f := newFixture(t, Options{})
	f.s.status = func(path string, _ int) int {
		if path == "/gone" {
			return http.StatusGone
		}
		return http.StatusCreated
	}
	newDevice(t, "/gone").subscribe(t, f.p, f.s, tokA, "old phone")
	newDevice(t, "/kept").subscribe(t, f.p, f.s, tokA, "new phone")
	f.ask(tokA, "q-1", "?")
	f.s.waitFor(t, "/gone", 1)
	f.s.waitFor(t, "/kept", 1)
	room := storeRoom(tokA)
	for deadline := time.Now().Add(10 * time.Second); ; {
		subs, _ := f.subs.List(room)
		if len(subs) == 1 && subs[0].Device == "new phone" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("subscriptions: %+v", subs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	again, err := OpenFileSubscriptions(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	if subs, _ := again.List(room); len(subs) != 1 {
		t.Errorf("on disk: %+v", subs)
	}
}

// TestFailingServiceIsRetriedAndDelaysNothing: a push service that
// fails (500) is tried again with backoff until it takes the push; one
// that hangs delays neither the other devices nor the agent's question.
func TestFailingServiceIsRetriedAndDelaysNothing(t *testing.T) {
	f := newFixture(t, Options{Backoff: time.Millisecond})
	f.s.status = func(path string, n int) int {
		if path == "/flaky" && n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusCreated
	}
	newDevice(t, "/flaky").subscribe(t, f.p, f.s, tokA, "flaky")
	newDevice(t, "/hang/x").subscribe(t, f.p, f.s, tokA, "hung")
	newDevice(t, "/fine").subscribe(t, f.p, f.s, tokA, "fine")
	answered := f.ask(tokA, "q-1", "?")
	f.s.waitFor(t, "/fine", 1)
	f.s.waitFor(t, "/flaky", 3)
	if err := f.hub.Answer(context.Background(), tokA, wire.AskQuestion, "q-1", hub.Reply{ClientID: "pc", Nickname: "PC"}); err != nil {
		t.Fatal(err)
	}
	<-answered // while the hung service still holds its push
	f.s.waitFor(t, "/fine", 2)
}

// TestLongQuestionFitsAPush: a question of 100,000 characters is cut to
// what a push carries (4,096 bytes encrypted, padded).
func TestLongQuestionFitsAPush(t *testing.T) {
	f := newFixture(t, Options{})
	d := newDevice(t, "/d")
	d.subscribe(t, f.p, f.s, tokA, strings.Repeat("n", 64), strings.Repeat("r", 40), strings.Repeat("é", 20))
	f.ask(tokA, strings.Repeat("i", 200), strings.Repeat("long words ", 10_000))
	got := d.open(t, f.s, f.s.waitFor(t, "/d", 1)[0])
	if len(got.raw) > 2048 {
		t.Errorf("the push carries %d bytes", len(got.raw))
	}
}

// TestEscapedQuestionFitsAPush: what JSON writes longer than it reads
// (<, > and &, control characters: six bytes each) still fits a push,
// in the request's ID, the agent's and project's names, the options and
// the text alike: a question of code is pushed, and opens.
func TestEscapedQuestionFitsAPush(t *testing.T) {
	f := newFixture(t, Options{})
	d := newDevice(t, "/d")
	d.subscribe(t, f.p, f.s, tokA, "phone")
	long := func(n int) string { return strings.Repeat("<\x01&>", n)[:n] }
	opts := make([]*pb.Option, 3)
	for i := range opts {
		opts[i] = &pb.Option{Label: strings.Repeat(string(rune('a'+i)), 1) + long(39)}
	}
	id := long(128)
	go func() {
		_, _ = f.hub.Ask(context.Background(), tokA, hub.Request{Kind: wire.AskQuestion, ID: id,
			Text: "if (a < b && c > d) {\x01" + long(10_000), ProjectDirectory: "/src/" + long(200), AgentName: long(200),
			Questions: []*pb.Question{{Options: opts, Custom: true}}, Timeout: time.Hour})
	}()
	got := d.open(t, f.s, f.s.waitFor(t, "/d", 1)[0])
	if got.msg.ID != id || !strings.HasPrefix(got.msg.Body, "if (a < b && c > d)") {
		t.Errorf("the push is for %q and says %q", got.msg.ID, got.msg.Body)
	}
	for i, a := range got.msg.Actions {
		if a != opts[i].GetLabel() {
			t.Errorf("action %d is %q, want the option's label %q", i, a, opts[i].GetLabel())
		}
	}
}

// TestBadSubscriptionsAreRefused: what is not a push subscription is
// refused with 400 and why.
func TestBadSubscriptionsAreRefused(t *testing.T) {
	f := newFixture(t, Options{})
	f.p.o.AllowHTTP = false
	good := newDevice(t, "/x")
	key := base64.RawURLEncoding.EncodeToString(good.key.PublicKey().Bytes())
	auth := base64.RawURLEncoding.EncodeToString(good.auth)
	for _, c := range []struct{ body, want string }{
		{`{"endpoint":"http://push.example/x","keys":{"p256dh":"` + key + `","auth":"` + auth + `"}}`, "https"},
		{`{"endpoint":"https://push.example/x","keys":{"p256dh":"AAAA","auth":"` + auth + `"}}`, "p256dh"},
		{`{"endpoint":"https://push.example/x","keys":{"p256dh":"` + key + `","auth":"AAAA"}}`, "auth"},
		{`{"endpoint":"https://push.example/x","keys":{"p256dh":"` + key + `","auth":"` + auth + `"},"replies":["` + strings.Repeat("r", 41) + `"]}`, "replies"},
		{`{"endpoint":"https://push.example/x","keys":{"p256dh":"` + key + `","auth":"` + auth + `"},"extra":1}`, "documented form"},
		{`[]`, "documented form"},
		// A key given twice has no one meaning; encoding/json would keep
		// the last, in any case.
		{`{"endpoint":"https://push.example/x","endpoint":"https://push.example/y","keys":{"p256dh":"` + key + `","auth":"` + auth + `"}}`, "more than once"},
		{`{"endpoint":"https://push.example/x","Endpoint":"https://push.example/y","keys":{"p256dh":"` + key + `","auth":"` + auth + `"}}`, "more than once"},
		{`{"endpoint":"https://push.example/x","keys":{"p256dh":"` + key + `","auth":"` + auth + `","AUTH":"` + auth + `"}}`, "more than once"},
		{`{"endpoint":"https://push.example/x","keys":{"p256dh":"` + key + `","auth":"` + auth + `"}}{}`, "documented form"},
	} {
		rec := httptest.NewRecorder()
		f.p.Subscribe(tokA).ServeHTTP(rec, httptest.NewRequest("POST", "/push/subscriptions", strings.NewReader(c.body)))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%.60s: %d %s, want 400 about %s", c.body, rec.Code, rec.Body, c.want)
		}
	}
}

func storeRoom(token string) string { return store.Room(token) }

// TestPushesShareConnections: a question for 30 devices of one push
// service is pushed over a few connections kept from one question to the
// next, with at most maxPerService pushes in flight at once, and with the
// Pusher's own HTTP client.
func TestPushesShareConnections(t *testing.T) {
	var (
		mu               sync.Mutex
		conns, now, most int
		got              = map[string]int{}
		wake             = make(chan struct{}, 1000)
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		now++
		most = max(most, now)
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		now--
		got[r.URL.Path]++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		wake <- struct{}{}
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	keys, _ := LoadOrCreateKeys(dir)
	subs, _ := OpenFileSubscriptions(dir)
	h := hub.New(hub.Options{})
	t.Cleanup(h.Close)
	p := New(Options{Hub: h, Subscriptions: subs, Keys: keys, AllowHTTP: true, AllowPrivateEndpoints: true})
	t.Cleanup(p.Close)
	const devices = 30
	for i := range devices {
		d := newDevice(t, "/d"+strconv.Itoa(i))
		d.subscribe(t, p, &service{Server: srv}, tokA, "device "+strconv.Itoa(i))
	}
	pushes := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, c := range got {
			n += c
		}
		return n
	}
	for q := range 2 {
		go func() {
			_, _ = h.Ask(t.Context(), tokA, hub.Request{Kind: wire.AskQuestion, ID: "q" + strconv.Itoa(q), Text: "?", Timeout: time.Hour})
		}()
		deadline := time.After(20 * time.Second)
		for pushes() < devices*(q+1) {
			select {
			case <-wake:
			case <-deadline:
				t.Fatalf("%d pushes", pushes())
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// A connection goes back to the pool a moment after its push ends, so
	// the next may dial one more now and then: a few, not one a push.
	if most > maxPerService || conns > 2*maxPerService {
		t.Errorf("%d pushes in flight at most, over %d connections (for %d pushes); want at most %d and %d", most, conns, 2*devices, maxPerService, 2*maxPerService)
	}
}

// TestServiceSlotsAreForgotten: the bound of pushes in flight to a push
// service was kept by its host for as long as the server ran, for every
// host a subscription ever named: a token's devices subscribing and
// unsubscribing at new hosts grew it without end. A host's bound now
// goes with its last push.
func TestServiceSlotsAreForgotten(t *testing.T) {
	s := newService(t)
	// Every host reaches the one double.
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, s.Listener.Addr().String())
	}}
	t.Cleanup(tr.CloseIdleConnections)
	f := newFixture(t, Options{Client: &http.Client{Transport: tr}})
	const hosts = 20
	for i := range hosts {
		d := newDevice(t, "/d"+strconv.Itoa(i))
		at := &service{Server: &httptest.Server{URL: "http://push-" + strconv.Itoa(i) + ".example"}}
		d.subscribe(t, f.p, at, tokA, "device "+strconv.Itoa(i))
	}
	f.ask(tokA, "q-1", "Deploy?")
	for i := range hosts {
		s.waitFor(t, "/d"+strconv.Itoa(i), 1)
	}
	deadline := time.After(10 * time.Second)
	for {
		f.p.mu.Lock()
		n := len(f.p.slots)
		f.p.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-s.wake:
		case <-time.After(time.Millisecond):
		case <-deadline:
			t.Fatalf("%d push services' bounds kept once their pushes were done, want 0", n)
		}
	}
}

// TestResendPushesWhatWaits: after a restart, the questions still
// waiting are pushed again (one saved just before a kill -9 may never
// have been), under their tag, with a capability that answers.
func TestResendPushesWhatWaits(t *testing.T) {
	f := newFixture(t, Options{})
	// Asked while no device was subscribed: nothing pushed.
	answered := f.ask(tokA, "q-1", "Deploy?")
	for n, _ := f.hub.PendingMessages(tokA); len(n) == 0; n, _ = f.hub.PendingMessages(tokA) {
		time.Sleep(time.Millisecond) // the asking goroutine has not asked yet
	}
	phone := newDevice(t, "/phone")
	phone.subscribe(t, f.p, f.s, tokA, "Pixel 8 · Chrome", "Yes", "No")

	f.p.Resend([]string{tokA, tokB})
	got := phone.open(t, f.s, f.s.waitFor(t, "/phone", 1)[0])
	if got.msg.Type != "ask" || got.msg.ID != "q-1" || got.msg.Cap == "" {
		t.Fatalf("pushed again: %+v", got.msg)
	}
	if _, err := f.caps.Use(context.Background(), f.hub, got.msg.Cap, "Yes", time.Now()); err != nil {
		t.Fatalf("its capability: %v", err)
	}
	if rep := <-answered; rep == nil || rep.Contents[0].GetText().GetText() != "Yes" {
		t.Fatalf("the agent got %+v", rep)
	}
}

// TestPushesCountWhatWaits: every push says how many of its token's
// questions wait, the one it brings included and a settled one not, so
// that a device's service worker keeps the app's badge right while no
// page of the app is open; and under which subscription, so that a
// browser subscribed under two tokens adds their counts up. The device
// whose button answered is sent no settled push: its notification closed
// at the tap, and a push that closes nothing is a silent push to Chrome.
func TestPushesCountWhatWaits(t *testing.T) {
	f := newFixture(t, Options{})
	phone, laptop := newDevice(t, "/phone"), newDevice(t, "/laptop")
	phoneID := phone.subscribe(t, f.p, f.s, tokA, "Pixel 8 · Chrome", "Yes", "No")
	laptopID := laptop.subscribe(t, f.p, f.s, tokA, "Laptop", "Yes", "No")
	// The same browser under another token: another subscription.
	phoneB := phone.subscribe(t, f.p, f.s, tokB, "Pixel 8 · Chrome")
	if phoneB == phoneID {
		t.Fatal("one endpoint under two tokens has one subscription ID")
	}
	f.ask(tokB, "b-1", "Another room's question?")
	if b := phone.open(t, f.s, f.s.waitFor(t, "/phone", 1)[0]).msg; b.ID != "b-1" || b.Sub != phoneB || b.Waiting != 1 {
		t.Fatalf("the other token's push: %+v", b)
	}

	first := f.ask(tokA, "q-1", "Deploy?")
	a1 := phone.open(t, f.s, f.s.waitFor(t, "/phone", 2)[1]).msg
	second := f.ask(tokA, "q-2", "Merge?")
	a2 := phone.open(t, f.s, f.s.waitFor(t, "/phone", 3)[2]).msg
	if a1.Type != "ask" || a1.Waiting != 1 || a2.Type != "ask" || a2.Waiting != 2 {
		t.Fatalf("asked: %s waiting %d, then %s waiting %d; want 1 then 2", a1.ID, a1.Waiting, a2.ID, a2.Waiting)
	}
	if a1.Sub != phoneID || a2.Sub != phoneID {
		t.Errorf("asked under subscription %q, %q; want %q", a1.Sub, a2.Sub, phoneID)
	}
	for _, c := range []struct {
		m      message
		answer chan *hub.Reply
		n      int
		want   int
	}{{a1, first, 3, 1}, {a2, second, 4, 0}} {
		if _, err := f.caps.Use(context.Background(), f.hub, c.m.Cap, "Yes", time.Now()); err != nil {
			t.Fatalf("answer %s: %v", c.m.ID, err)
		}
		<-c.answer
		s := laptop.open(t, f.s, f.s.waitFor(t, "/laptop", c.n)[c.n-1])
		if s.msg.Type != "settled" || s.msg.ID != c.m.ID || s.msg.Waiting != c.want || s.msg.Sub != laptopID {
			t.Errorf("settled %s: %+v, want waiting %d under %q", c.m.ID, s.msg, c.want, laptopID)
		}
		if c.want == 0 && !strings.Contains(s.raw, `"waiting":0`) {
			t.Errorf("none waiting is not said: %s", s.raw)
		}
	}
	// A device's pushes go in order: the next after its asks is the
	// third question's, not a settled push for an answer it gave.
	f.ask(tokA, "q-3", "Tag it?")
	if next := phone.open(t, f.s, f.s.waitFor(t, "/phone", 4)[3]).msg; next.Type != "ask" || next.ID != "q-3" {
		t.Errorf("the device that answered was pushed %s %s after its answers, want q-3 asked", next.Type, next.ID)
	}
}
