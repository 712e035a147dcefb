package remoteinput_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/faultproxy"
	"github.com/agentassistant/agentassistant/internal/remoteinput"
	"github.com/agentassistant/agentassistant/internal/typing"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
)

const token = "remote-input-token-0123456789"

// keyboard records what it is asked to type; gate, when set, holds every
// call until a value arrives on it.
type keyboard struct {
	mu   sync.Mutex
	ops  []string
	fail error
	gate chan struct{}
}

func (k *keyboard) Name() string { return "test" }
func (k *keyboard) Type(ctx context.Context, s string) error {
	return k.op(ctx, "type "+s)
}
func (k *keyboard) Press(ctx context.Context, key typing.Key, n int) error {
	return k.op(ctx, fmt.Sprintf("%s×%d", key, n))
}
func (k *keyboard) op(ctx context.Context, s string) error {
	if k.gate != nil {
		select {
		case <-k.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fail != nil {
		return k.fail
	}
	k.ops = append(k.ops, s)
	return nil
}
func (k *keyboard) take() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	ops := k.ops
	k.ops = nil
	return ops
}

type fixture struct {
	ts    *httptest.Server
	proxy *faultproxy.Proxy // between the companion and the server
	kb    *keyboard
	logs  *syncBuffer
	phone *wstest.Client
	pc    string // the companion's client id
	done  chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// waitFor returns the log once it holds text (or after 10 s).
func (s *syncBuffer) waitFor(t *testing.T, text string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.String(), text) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return s.String()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs the real server in process, the companion against it with kb,
// and a phone logged in under the same token that has found the companion
// in its online list.
func start(t *testing.T, kb *keyboard, o remoteinput.Options) *fixture {
	t.Helper()
	toks, err := auth.NewTokens(token)
	if err != nil {
		t.Fatal(err)
	}
	s := srv.New(srv.Options{Tokens: toks})
	ts := httptest.NewServer(s.Handler())
	proxy, err := faultproxy.Start(strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ts: ts, proxy: proxy, kb: kb, logs: &syncBuffer{}, done: make(chan error, 1)}
	o.URLs = append(o.URLs, "ws://"+proxy.Addr()+"/ws") // after any the test gives
	if o.Token == "" {
		o.Token = token
	}
	if o.Nickname == "" {
		o.Nickname = "PC input (test)"
	}
	o.Keyboard = kb
	o.Logger = slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.MinBackoff, o.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	go func() { f.done <- remoteinput.New(o).Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-f.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
			f.done <- err
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10s of the cancel")
		}
		if f.phone != nil {
			f.phone.Close()
		}
		proxy.Close()
		s.Close()
		ts.Close()
		if strings.Contains(f.logs.String(), token) {
			t.Errorf("the companion logged the token:\n%s", f.logs.String())
		}
	})
	return f
}

// online logs the phone in and waits for the companion in its list.
func (f *fixture) online(t *testing.T) {
	t.Helper()
	if f.phone == nil {
		p, err := wstest.Dial(f.ts.URL, token, "phone", nil)
		if err != nil {
			t.Fatal(err)
		}
		f.phone = p
	}
	f.pc = f.waitCompanion(t, "")
}

// waitCompanion asks for the online list until a companion other than
// not is in it, and returns its client id.
func (f *fixture) waitCompanion(t *testing.T, not string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err := f.phone.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{}}); err != nil {
			t.Fatal(err)
		}
		m, err := f.phone.Expect("GetOnlineUsers", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range m.GetGetOnlineUsersResponse().GetOnlineUsers() {
			if u.GetNickname() == "⌨ PC input (test)" && u.GetClientId() != not {
				return u.GetClientId()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the companion did not appear online; its log:\n%s", f.logs.String())
	return ""
}

// send chats content to the companion and returns its answer.
func (f *fixture) send(t *testing.T, content string) string {
	t.Helper()
	err := f.phone.Send(&pb.WebsocketMessage{
		Cmd:                    "SendChatMessage",
		SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: f.pc, Content: content},
	})
	if err != nil {
		t.Fatal(err)
	}
	return f.answer(t)
}

func (f *fixture) answer(t *testing.T) string {
	t.Helper()
	m, err := f.phone.Expect("ChatMessageNotification", 10*time.Second)
	if err != nil {
		t.Fatalf("%v; companion log:\n%s", err, f.logs.String())
	}
	c := m.GetChatMessageNotification().GetChatMessage()
	if c.GetSenderClientId() != f.pc {
		t.Fatalf("answer from %s, want the companion %s", c.GetSenderClientId(), f.pc)
	}
	return c.GetContent()
}

func TestTypesWhatTheChatSays(t *testing.T) {
	kb := &keyboard{}
	f := start(t, kb, remoteinput.Options{})
	f.online(t)
	if got := f.send(t, "hello 你好\r\nsecond line"); got != "✓ typed 20 characters" {
		t.Errorf("answer %q", got)
	}
	if got, want := kb.take(), []string{"type hello 你好", "Enter×1", "type second line"}; !reflect.DeepEqual(got, want) {
		t.Errorf("typed %q, want %q", got, want)
	}
	if strings.Contains(f.logs.String(), "你好") {
		t.Errorf("the companion logged what it typed:\n%s", f.logs.String())
	}
}

func TestUndoClearEnter(t *testing.T) {
	kb := &keyboard{}
	f := start(t, kb, remoteinput.Options{})
	f.online(t)
	ctl := func(verb string) string { return f.send(t, remoteinput.ControlPrefix+verb) }
	f.send(t, "abc")
	f.send(t, "de\nfg")
	f.send(t, "你好")
	kb.take()
	steps := []struct {
		verb, answer string
		ops          []string
	}{
		{remoteinput.Undo, "✓ erased 2 characters", []string{"Backspace×2"}}, // 你好
		{remoteinput.Undo, "✓ erased 2 characters", []string{"Backspace×2"}}, // fg, back to the Enter
		{remoteinput.Undo, "nothing to undo: only what this PC typed since the last Enter can be erased", nil},
	}
	for _, s := range steps {
		if got := ctl(s.verb); got != s.answer {
			t.Errorf("%s: answer %q, want %q", s.verb, got, s.answer)
		}
		if got := kb.take(); !reflect.DeepEqual(got, s.ops) {
			t.Errorf("%s: pressed %q, want %q", s.verb, got, s.ops)
		}
	}
	f.send(t, "xy")
	f.send(t, "z\tw")
	kb.take()
	if got := ctl(remoteinput.Backspace); got != "✓ pressed Backspace" {
		t.Errorf("backspace: %q", got)
	}
	if got := ctl(remoteinput.Clear); got != "✓ erased 4 characters" { // xy + z<Tab> (w went by Backspace)
		t.Errorf("clear: %q", got)
	}
	if got := ctl(remoteinput.Enter); got != "✓ pressed Enter" {
		t.Errorf("enter: %q", got)
	}
	if got, want := kb.take(), []string{"Backspace×1", "Backspace×4", "Enter×1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pressed %q, want %q", got, want)
	}
	if got := ctl("format c:"); !strings.HasPrefix(got, `✗ unknown command "format c:"`) {
		t.Errorf("unknown verb: %q", got)
	}
	if got := kb.take(); got != nil {
		t.Errorf("an unknown command did %q", got)
	}
}

func TestRefusesWhatItMustNotType(t *testing.T) {
	kb := &keyboard{}
	f := start(t, kb, remoteinput.Options{MaxChars: 10})
	f.online(t)
	if got := f.send(t, strings.Repeat("长", 11)); got != "✗ not typed: 11 characters, more than the 10 this PC types at once" {
		t.Errorf("answer %q", got)
	}
	// Control characters never reach the window; a text of nothing else
	// types nothing.
	if got := f.send(t, "\x1b\x03\x7f"); got != "nothing to type" {
		t.Errorf("answer %q", got)
	}
	if got := f.send(t, "a\x1b[31mb\x03"); got != "✓ typed 6 characters" {
		t.Errorf("answer %q", got)
	}
	if got, want := kb.take(), []string{"type a[31mb"}; !reflect.DeepEqual(got, want) {
		t.Errorf("typed %q, want %q", got, want)
	}
}

func TestKeyboardFailureReachesTheSender(t *testing.T) {
	kb := &keyboard{fail: errors.New("xdotool: Can't open display")}
	f := start(t, kb, remoteinput.Options{})
	f.online(t)
	if got := f.send(t, "hello"); got != "✗ could not type: xdotool: Can't open display" {
		t.Errorf("answer %q", got)
	}
	// Nothing reached the window, so there is nothing to undo.
	kb.fail = nil
	if got := f.send(t, remoteinput.ControlPrefix+remoteinput.Undo); !strings.HasPrefix(got, "nothing to undo") {
		t.Errorf("undo after a failure: %q", got)
	}
}

func TestBusyCompanionSaysSo(t *testing.T) {
	kb := &keyboard{gate: make(chan struct{})}
	f := start(t, kb, remoteinput.Options{})
	f.online(t)
	// One message is being typed (held at the gate), 16 wait; the next
	// is refused at once.
	for i := range 18 {
		err := f.phone.Send(&pb.WebsocketMessage{
			Cmd:                    "SendChatMessage",
			SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: f.pc, Content: fmt.Sprint("m", i)},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := f.answer(t); !strings.HasPrefix(got, "✗ not typed: 16 messages are still waiting") {
		t.Errorf("answer %q", got)
	}
	close(kb.gate)
	for range 17 {
		if got := f.answer(t); got != "✓ typed 2 characters" && got != "✓ typed 3 characters" {
			t.Errorf("answer %q", got)
		}
	}
	if n := len(kb.take()); n != 17 {
		t.Errorf("typed %d messages, want the 17 it accepted", n)
	}
}

func TestWrongTokenStops(t *testing.T) {
	toks, _ := auth.NewTokens(token)
	s := srv.New(srv.Options{Tokens: toks})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	defer s.Close()
	var logs syncBuffer
	c := remoteinput.New(remoteinput.Options{
		URLs: []string{"ws" + strings.TrimPrefix(ts.URL, "http") + "/ws"}, Token: "wrong-token-0123456789",
		Keyboard: &keyboard{}, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := c.Run(ctx)
	if !errors.Is(err, remoteinput.ErrRefused) || !strings.Contains(err.Error(), "invalid token") {
		t.Fatalf("Run = %v, want the refusal", err)
	}
	if strings.Contains(logs.String(), "wrong-token") {
		t.Error("the token is in the log")
	}
}

func TestReconnects(t *testing.T) {
	kb := &keyboard{}
	f := start(t, kb, remoteinput.Options{})
	f.online(t)
	old := f.pc
	// The link drops and refuses new connections for a while, as when
	// the server restarts or the PC changes network.
	f.proxy.SetDown(true)
	if !strings.Contains(f.logs.waitFor(t, "retrying"), "retrying") {
		t.Fatal("no retry")
	}
	f.proxy.SetDown(false)
	f.pc = f.waitCompanion(t, old)
	if got := f.send(t, "back"); got != "✓ typed 4 characters" {
		t.Errorf("answer after the reconnect %q", got)
	}
}

// TestMovesToTheNextServer: of a cluster's instances, one that cannot be
// reached is left for the next.
func TestMovesToTheNextServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	f := start(t, &keyboard{}, remoteinput.Options{URLs: []string{"ws://" + gone + "/ws"}})
	f.online(t)
	if !strings.Contains(f.logs.String(), gone) {
		t.Errorf("the companion never tried %s:\n%s", gone, f.logs.String())
	}
	if got := f.send(t, "here"); got != "✓ typed 4 characters" {
		t.Errorf("answer %q", got)
	}
}

func TestNickname(t *testing.T) {
	for in, want := range map[string]string{
		"PC input (box)": "⌨ PC input (box)",
		"⌨ laptop":       "⌨ laptop",
		"⌨laptop":        "⌨ laptop",
		"  desk  ":       "⌨ desk",
	} {
		if got := remoteinput.Nickname(in); got != want {
			t.Errorf("Nickname(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestUpstreamSendBackspace: the SendBackspaceRequest that existing
// clients send (WebsocketMessage field 25, Cmd "SendBackspace") presses
// Backspace once on the PC, and the sender is told.
func TestUpstreamSendBackspace(t *testing.T) {
	kb := &keyboard{}
	f := start(t, kb, remoteinput.Options{})
	f.online(t)
	f.send(t, "abc")
	kb.take()
	err := f.phone.Send(&pb.WebsocketMessage{
		Cmd:                  "SendBackspace",
		SendBackspaceRequest: &pb.SendBackspaceRequest{ReceiverClientId: f.pc},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.answer(t); got != "✓ pressed Backspace" {
		t.Errorf("answer %q", got)
	}
	if got, want := kb.take(), []string{"Backspace×1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pressed %q, want %q", got, want)
	}
}

// TestTokenAtTheUpgrade: the companion presents its token in the
// WebSocket upgrade, not only in its login frame, so the server keeps its
// place apart from strangers' connections waiting to log in: a flood of
// those that turns their table over faster than a login's round trip
// cannot close it between its upgrade and its login (srv
// TestOwnerLogsInDuringAFlood).
func TestTokenAtTheUpgrade(t *testing.T) {
	toks, _ := auth.NewTokens(token)
	s := srv.New(srv.Options{Tokens: toks})
	t.Cleanup(func() { _ = s.Close() })
	presented := make(chan string, 16)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			tok, err := auth.UpgradeToken(r)
			if err != nil {
				tok = "error: " + err.Error()
			}
			presented <- tok
		}
		s.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- remoteinput.New(remoteinput.Options{URLs: []string{"ws" + strings.TrimPrefix(ts.URL, "http") + "/ws"}, Token: token,
			Keyboard: &keyboard{}, Logger: slog.New(slog.DiscardHandler)}).Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case got := <-presented:
		if got != token {
			t.Errorf("the upgrade presented %q, want the token", got)
		}
	case <-time.After(10 * time.Second): // only against a hang
		t.Fatal("the companion did not connect")
	}
}
