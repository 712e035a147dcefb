package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/config"
	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/internal/xvfbtest"
	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
)

const token = "input-main-token-0123456789"

// isolate keeps the user's config and token out of the test.
func isolate(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Chdir(home)
}

func TestVersionAndUsage(t *testing.T) {
	isolate(t)
	var out, errs bytes.Buffer
	if err := run(context.Background(), []string{"-version"}, &out, &errs); err != nil || !strings.HasPrefix(out.String(), "agentassistant-input ") {
		t.Errorf("-version: %v, %q", err, out.String())
	}
	for _, args := range [][]string{nil, {"-input", "a", "-listen"}, {"-input", "a", "-input64", "YQ=="}} {
		err := run(context.Background(), args, &out, &errs)
		if err == nil || !strings.Contains(err.Error(), "exactly one of -input, -input64 or -listen") {
			t.Errorf("%q: %v", args, err)
		}
	}
	if err := run(context.Background(), []string{"-input", "a", "b"}, &out, &errs); err == nil || !strings.Contains(err.Error(), `unexpected argument "b"`) {
		t.Errorf("stray argument: %v", err)
	}
}

func TestNoWayToTypeSaysWhatToInstall(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the X11/Wayland choice")
	}
	isolate(t)
	t.Setenv("PATH", t.TempDir()) // no wtype, no xdotool
	var out, errs bytes.Buffer
	for _, tc := range []struct{ wayland, display, want string }{
		{"wayland-0", "", "this is a Wayland session and wtype is not on PATH: install wtype (Debian/Ubuntu: sudo apt install wtype"},
		{"", ":54321", `cannot reach the X display ":54321"`},
		{"", "", "no graphical session here"},
	} {
		t.Setenv("WAYLAND_DISPLAY", tc.wayland)
		t.Setenv("DISPLAY", tc.display)
		for _, args := range [][]string{{"-input", "hello"}, {"-listen", "-token", token}} {
			err := run(context.Background(), args, &out, &errs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v with WAYLAND_DISPLAY=%q DISPLAY=%q: %v, want %q", args, tc.wayland, tc.display, err, tc.want)
			}
		}
	}
	if err := run(context.Background(), []string{"-input", "x", "-backend", "xdotool"}, &out, &errs); err == nil ||
		!strings.Contains(err.Error(), "xdotool was not found on PATH: install xdotool") {
		t.Errorf("-backend xdotool without it: %v", err)
	}
}

func TestInputIntoXterm(t *testing.T) {
	isolate(t)
	d := xvfbtest.Start(t)
	x := d.StartXterm(t)
	t.Setenv("DISPLAY", d.Name)
	t.Setenv("WAYLAND_DISPLAY", "")
	var out, errs bytes.Buffer
	if err := run(context.Background(), []string{"-input", "hello 你好\nsecond line"}, &out, &errs); err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte("\r\n第三行 ✓"))
	if err := run(context.Background(), []string{"-input64", b64}, &out, &errs); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"-input64", "not base64!"}, &out, &errs); err == nil || !strings.Contains(err.Error(), "decode -input64") {
		t.Errorf("bad base64: %v", err)
	}
	if got, want := x.Close(t), "hello 你好\nsecond line\n第三行 ✓"; got != want {
		t.Errorf("the xterm got %q, want %q", got, want)
	}
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

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestListenIntoXterm: the companion (through run, as the binary runs)
// joins a real server; a phone on /ws chats to it; the text lands in an
// xterm on Xvfb, a mistake undone on the way.
func TestListenIntoXterm(t *testing.T) {
	isolate(t)
	d := xvfbtest.Start(t)
	x := d.StartXterm(t)
	t.Setenv("DISPLAY", d.Name)
	t.Setenv("WAYLAND_DISPLAY", "")

	toks, _ := auth.NewTokens(token)
	s := srv.New(srv.Options{Tokens: toks})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	defer s.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))

	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-listen", "-host", host, "-port", port, "-token", token, "-nickname", "desk"}, &logs, &logs)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		if strings.Contains(logs.String(), token) {
			t.Errorf("the log holds the token:\n%s", logs.String())
		}
	}()

	phone, err := wstest.Dial(ts.URL, token, "phone", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer phone.Close()
	var pc string
	for deadline := time.Now().Add(10 * time.Second); pc == "" && time.Now().Before(deadline); {
		if err := phone.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{}}); err != nil {
			t.Fatal(err)
		}
		m, err := phone.Expect("GetOnlineUsers", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range m.GetGetOnlineUsersResponse().GetOnlineUsers() {
			if u.GetNickname() == "⌨ desk" {
				pc = u.GetClientId()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pc == "" {
		t.Fatalf("the companion did not come online:\n%s", logs.String())
	}
	chat := func(content, want string) {
		t.Helper()
		if err := phone.Send(&pb.WebsocketMessage{Cmd: "SendChatMessage", SendChatMessageRequest: &pb.SendChatMessageRequest{ReceiverClientId: pc, Content: content}}); err != nil {
			t.Fatal(err)
		}
		m, err := phone.Expect("ChatMessageNotification", 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.GetChatMessageNotification().GetChatMessage().GetContent(); got != want {
			t.Errorf("after %q the companion said %q, want %q", content, got, want)
		}
	}
	chat("hello 你好\nsecond", "✓ typed 15 characters")
	chat(" lien", "✓ typed 5 characters")
	chat("\x1binput:undo", "✓ erased 5 characters")
	chat(" line", "✓ typed 5 characters")
	if got, want := x.Close(t), "hello 你好\nsecond line"; got != want {
		t.Errorf("the xterm got %q, want %q", got, want)
	}
}

// TestListenReadsTheMCPConfig: with no flags but -listen, the server comes
// from agentassistant-mcp.toml (whose other keys are left alone) and the
// token from the server's data directory, as agentassistant-mcp does.
func TestListenReadsTheMCPConfig(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("a shell script stands in for xdotool")
	}
	isolate(t)
	toks, _ := auth.NewTokens(token)
	s := srv.New(srv.Options{Tokens: toks})
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	defer s.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))
	cfg := fmt.Sprintf("agentassistant_server_host = %q\nagentassistant_server_port = %s\nrelay_session = \"study\"\nsome_future_key = 1\n", host, port)
	if err := os.WriteFile("agentassistant-mcp.toml", []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(config.AppDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(config.AppDir(), auth.TokenFile), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "xdotool"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	t.Setenv("DISPLAY", ":0") // the script types into no display

	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-listen", "-backend", "xdotool"}, &logs, &logs) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	phone, err := wstest.Dial(ts.URL, token, "phone", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer phone.Close()
	hostname, _ := os.Hostname()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := phone.Send(&pb.WebsocketMessage{Cmd: "GetOnlineUsers", GetOnlineUsersRequest: &pb.GetOnlineUsersRequest{}}); err != nil {
			t.Fatal(err)
		}
		m, err := phone.Expect("GetOnlineUsers", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		users := m.GetGetOnlineUsersResponse().GetOnlineUsers()
		if slices.ContainsFunc(users, func(u *pb.OnlineUser) bool { return u.GetNickname() == "⌨ PC input ("+hostname+")" }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the companion did not come online as ⌨ PC input (%s); online: %v; its log:\n%s", hostname, users, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestImpossibleSettings: -listen refuses a server address that cannot
// be one, naming the key and its flag, before it looks for a keyboard.
func TestImpossibleSettings(t *testing.T) {
	isolate(t)
	for args, want := range map[string]string{
		"-port 70000":      "agentassistant_server_port (-port) = 70000",
		"-port 0":          "agentassistant_server_port (-port) = 0",
		"-host http://srv": `agentassistant_server_host (-host) = "http://srv"`,
		"-log-level loud":  `log_level (-log-level) = "loud"`,
	} {
		var out, errs bytes.Buffer
		err := run(context.Background(), append([]string{"-listen", "-token", token}, strings.Fields(args)...), &out, &errs)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error saying %q", args, err, want)
		}
	}
}
