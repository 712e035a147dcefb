package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
)

// TestHostileServerReplyIsBounded: a server (or what stands between) that
// answers a question with a gzip body of kilobytes that inflates to a
// reply of 128 MiB, or to one of ten million empty items (20 MB, which
// decoded would be some 800 MiB of structs), does not make
// agentassistant-mcp hold it, nor pass it to the MCP client: the call
// ends with an error the agent can read.
func TestHostileServerReplyIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		body func(w io.Writer)
	}{
		{"inflates to 128 MiB", func(w io.Writer) {
			// AskQuestionResponse{contents: [{type: 1, text: {text: "aaa…"}}]}
			const text = 128 << 20
			textContent := protowire.AppendTag(nil, 2, protowire.BytesType)
			textContent = protowire.AppendVarint(textContent, text)
			content := protowire.AppendTag(nil, 1, protowire.VarintType)
			content = protowire.AppendVarint(content, 1)
			content = protowire.AppendTag(content, 2, protowire.BytesType)
			content = protowire.AppendVarint(content, uint64(len(textContent)+text))
			msg := protowire.AppendTag(nil, 4, protowire.BytesType)
			msg = protowire.AppendVarint(msg, uint64(len(content)+len(textContent)+text))
			_, _ = w.Write(append(append(msg, content...), textContent...))
			_, _ = io.Copy(w, &padding{n: text})
		}},
		{"ten million empty contents", func(w io.Writer) {
			// AskQuestionResponse{contents: [{}, {}, …]}: 20 MB, under the bound
			empty := protowire.AppendVarint(protowire.AppendTag(nil, 4, protowire.BytesType), 0)
			_, _ = w.Write(bytes.Repeat(empty, 10_000_000))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { hostileReply(t, tc.body) })
	}
}

// hostileReply runs agentassistant-mcp against a server that answers a
// question with body, gzipped, and checks what the MCP client is given
// and what it cost.
func hostileReply(t *testing.T, body func(w io.Writer)) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", home)
	t.Chdir(home)

	// Made before the measure: what the server costs is not the client's.
	var zipped bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zipped, gzip.BestSpeed)
	body(zw)
	_ = zw.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/proto")
		if r.URL.Path != agentassistprotoconnect.SrvAgentAssistAskQuestionProcedure {
			return // an empty message: no missed answers, a healthy server
		}
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(zipped.Bytes())
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	var stderr syncBuffer
	done := make(chan error, 1)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	go func() {
		done <- run(t.Context(), []string{"-host", "127.0.0.1", "-port", port, "-token", testToken}, stdinR, stdoutW, &stderr)
		_ = stdoutW.Close()
	}()
	go func() {
		for _, m := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask_question","arguments":{"question":"Which?","project_directory":"/src"}}}`,
		} {
			_, _ = io.WriteString(stdinW, m+"\n")
		}
	}()
	out := bufio.NewReader(stdoutR)
	var reply string
	for {
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("stdout ended before the call's result: %v\n%s", err, stderr.String())
		}
		if strings.HasPrefix(line, `{"jsonrpc":"2.0","id":2,`) {
			reply = line
			break
		}
	}
	runtime.ReadMemStats(&after)
	_ = stdinW.Close()
	go func() { _, _ = io.Copy(io.Discard, out) }()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	allocated := (after.TotalAlloc - before.TotalAlloc) >> 20
	t.Logf("%d MiB allocated, a result of %d bytes: %.300s", allocated, len(reply), reply)
	if len(reply) > 64<<10 {
		t.Errorf("the MCP client was given a result of %d bytes", len(reply))
	}
	if !strings.Contains(reply, `"isError":true`) || !strings.Contains(reply, "larger than") && !strings.Contains(reply, "more than") {
		t.Errorf("the call did not end with an error: %.300s", reply)
	}
	// connect-go inflates into a buffer that doubles up to the bound, then
	// counts what is left without keeping it: a few times maxReply, twice
	// that under the race detector, whose pools keep nothing. Unbounded,
	// a reply that inflated to 256 MiB cost 5.6 GiB.
	if allocated > 10*maxReply>>20 {
		t.Errorf("%d MiB allocated for the reply", allocated)
	}
}
