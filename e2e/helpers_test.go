// Package e2e drives the real binaries: agentassistant-srv as a process on
// a free port, agentassistant-mcp through mcp-go's stdio client, and /ws
// clients speaking the wire protocol.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

var binDir string

func TestMain(m *testing.M) {
	// AA_DIST: the binaries of an extracted release archive, tested as
	// they ship instead of built from this tree.
	if dir := os.Getenv("AA_DIST"); dir != "" {
		binDir = dir
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "aa-e2e-bin")
	if err != nil {
		panic(err)
	}
	build := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "../cmd/agentassistant-srv", "../cmd/agentassistant-mcp", "../cmd/agentassistant-input")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type server struct {
	URL    string // http://127.0.0.1:PORT
	Host   string
	Port   string
	Token  string
	Data   string
	cmd    *exec.Cmd
	log    *strings.Builder
	logw   *lockedWriter // log's writer: read the log while it runs through it
	killed bool
}

// kill9 kills the server the hard way: no shutdown, no flush.
func (s *server) kill9(t *testing.T) {
	t.Helper()
	s.killed = true
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

var urlLine = regexp.MustCompile(`https?://[^\s]+/\?token=[^\s]+`)

// startServer runs agentassistant-srv on a free port with the given tokens
// (the first is the main one) and returns once it prints its URL.
func startServer(t *testing.T, tokens ...string) *server {
	t.Helper()
	return startServerWith(t, "0", t.TempDir(), nil, tokens...)
}

// startServerWith runs agentassistant-srv on port with data as its data
// directory (to restart one where it was) and extra flags.
func startServerWith(t *testing.T, port, data string, extra []string, tokens ...string) *server {
	t.Helper()
	return startServerVia(t, nil, port, data, extra, tokens...)
}

// startServerVia is startServerWith, the server run through the command
// prefix (a shell that sets a limit, say) when there is one.
func startServerVia(t *testing.T, prefix []string, port, data string, extra []string, tokens ...string) *server {
	t.Helper()
	return startServerBin(t, filepath.Join(binDir, "agentassistant-srv"), prefix, port, data, extra, tokens...)
}

// startServerBin is startServerVia with bin as the server's binary (that
// of another release, say).
func startServerBin(t *testing.T, bin string, prefix []string, port, data string, extra []string, tokens ...string) *server {
	t.Helper()
	cfg := filepath.Join(data, "srv.toml")
	quoted := make([]string, len(tokens))
	for i, tok := range tokens {
		quoted[i] = fmt.Sprintf("%q", tok)
	}
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[server]\ntokens = [%s]\n", strings.Join(quoted, ","))), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-port", port, "-data", data, "-config", cfg, "-log-level", "debug"}, extra...)
	if len(tokens) > 0 {
		args = append(args, "-token", tokens[0])
	}
	args = append(append(prefix, bin), args...)
	cmd := exec.Command(args[0], args[1:]...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	logw := &lockedWriter{b: &logs}
	cmd.Stderr = logw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, Data: data, log: &logs, logw: logw}
	t.Cleanup(func() {
		if s.killed {
			return
		}
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Error("agentassistant-srv did not stop within 10s of SIGINT")
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logw.String())
		}
		for _, tok := range tokens {
			if strings.Contains(logw.String(), tok) {
				t.Errorf("the server log holds a token")
			}
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := urlLine.FindString(sc.Text()); m != "" {
				found <- m
			}
		}
	}()
	select {
	case line := <-found:
		u, err := url.Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		s.Host, s.Port = u.Hostname(), u.Port()
		s.URL = u.Scheme + "://" + u.Host
		s.Token = u.Query().Get("token")
	case <-time.After(30 * time.Second): // a NATS cluster still forming under load
		t.Fatalf("server printed no URL; log:\n%s", logw.String())
	}
	// The server logs that it listens just before it prints the URL, but
	// its log comes through a pipe of its own, copied by a goroutine that
	// may lag behind: once the line is in, so is everything the server
	// logged while starting (what it found in its data directory), for
	// the test to read.
	if !logw.waitFor("msg=listening addr=", 10*time.Second) {
		t.Fatalf("the server printed its URL but did not log that it listens; log:\n%s", logw.String())
	}
	return s
}

// startMCP launches agentassistant-mcp against s with token and
// initializes an MCP session with it.
func startMCP(t *testing.T, s *server, token string, extra ...string) *client.Client {
	t.Helper()
	return startMCPLogged(t, s, token, nil, extra...)
}

// startMCPLogged is startMCP with agentassistant-mcp's log (its stderr)
// written to log, when it is not nil, for a test to wait on.
func startMCPLogged(t *testing.T, s *server, token string, log io.Writer, extra ...string) *client.Client {
	t.Helper()
	args := append([]string{"-host", s.Host, "-port", s.Port, "-token", token}, extra...)
	// HOME and XDG point at an empty directory so no user config is read.
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home, "PATH=" + os.Getenv("PATH")}
	opts := []transport.StdioOption{transport.WithCommandFunc(func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, command, args...)
		cmd.Env = env
		cmd.Dir = home
		return cmd, nil
	})}
	if log != nil {
		opts = append(opts, transport.WithCommandStderrWriter(log))
	}
	c, err := client.NewStdioMCPClientWithOptions(filepath.Join(binDir, "agentassistant-mcp"), env, args, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The constructor starts the transport; Start also attaches the
	// notification handlers (progress, list_changed).
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

func callTool(ctx context.Context, c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return c.CallTool(ctx, req)
}

// resultText joins the text items of r.
func resultText(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// asAgent is the HTTP client a test asks through when it stands for
// agentassistant-mcp: it says, as the bridge does, that it takes answers
// given while its call was away (wire.TakesMissedHeader), so a restart
// keeps its requests pending for it to re-attach.
var asAgent = &http.Client{Transport: takesMissed{}}

type takesMissed struct{}

func (takesMissed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(wire.TakesMissedHeader, wire.TakesMissedYes)
	return http.DefaultTransport.RoundTrip(r)
}
