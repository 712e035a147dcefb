package rpc_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/rpc"
)

// unauthMax is the fixtures' MaxUnauthMessage: what a call may make the
// server read before its token is known.
const unauthMax = 1 << 10

// TestLimitsBeforeTheToken: a call whose header carries no valid token
// is read only up to MaxUnauthMessage, compressed or not, and a wrong
// header token is refused before its message is read at all; a refusal
// for size counts as a failed login. A valid header token lifts the
// limit to MaxMessage. A page of another site is refused whatever it
// presents.
func TestLimitsBeforeTheToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		header  []string // request headers, name and value
		message string   // the message's UserToken
		pad     int      // bytes of the client name
		gzip    bool
		want    string // the code
		says    string // in the error, when refused
		failed  bool   // the call counts as a failed login
	}{
		{name: "small, the token inside", message: tokA, pad: unauthMax / 2, want: "ok"},
		{name: "big, the token inside", message: tokA, pad: 4 * unauthMax, want: "resource_exhausted", says: auth.TokenHeader + " header", failed: true},
		{name: "big, the token in the header", header: []string{auth.TokenHeader, tokA}, pad: 4 * unauthMax, want: "ok"},
		// If the message were read first, its size would be the refusal.
		{name: "big, a wrong header token", header: []string{auth.TokenHeader, "not-a-token"}, pad: 4 * unauthMax, want: "unauthenticated", says: "missing or invalid token", failed: true},
		{name: "compressed, inflating past the limit, the token inside", message: tokA, pad: 64 * unauthMax, gzip: true, want: "resource_exhausted", says: auth.TokenHeader + " header", failed: true},
		{name: "compressed, inflating past the limit, the token in the header", header: []string{auth.TokenHeader, tokA}, pad: 64 * unauthMax, gzip: true, want: "ok"},
		{name: "a foreign page with a valid token", header: []string{auth.TokenHeader, tokA, "Origin", "http://evil.example"}, want: "permission_denied", says: "forbidden origin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// One failure is free: a second one is held back, so Failed
			// says whether this call counted as one.
			limiter := auth.NewLimiter(1, time.Hour)
			var opts []connect.ClientOption
			if tc.gzip {
				opts = append(opts, connect.WithSendGzip())
			}
			f := start(t, setup{rpc: rpc.Options{Limiter: limiter, Guard: &auth.Guard{}, MaxUnauthMessage: unauthMax}}, opts...)
			ctx, _ := headers(context.Background(), tc.header...)
			_, err := f.agent.SendMcpClientInfo(ctx, &pb.McpClientInfoRequest{UserToken: tc.message,
				Request: &pb.McpClientInfoData{ClientName: strings.Repeat("x", tc.pad)}})
			if got := codeOf(err); got != tc.want {
				t.Fatalf("code %s (%v), want %s", got, err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q does not say %q", err, tc.says)
			}
			if failed := limiter.Failed(peer) > 0; failed != tc.failed {
				t.Fatalf("counted as a failed login: %v, want %v", failed, tc.failed)
			}
		})
	}
}

// TestWaitingRoomIsBounded: a call without a valid header token takes a
// place among the connections waiting to log in (auth.Pending, shared
// with the WebSockets); when none is free, and none can be given up, it
// is refused before its message is read, with Retry-After: for its own
// address resource_exhausted, for the whole server unavailable. A call
// with a valid header token takes no place and always gets through.
func TestWaitingRoomIsBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		holder string // the address whose waiting connection holds the only place
		header []string
		want   string
	}{
		{name: "this address waits already", holder: peer, want: "resource_exhausted"},
		{name: "the server waits already", holder: "192.0.2.1:4000", want: "unavailable"},
		{name: "a valid header token does not wait", holder: peer, header: []string{auth.TokenHeader, tokA}, want: "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pending := auth.NewPending(1, 1)
			// A connection that cannot be evicted (nil): nothing makes room.
			release, err := pending.Acquire(tc.holder, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			f := start(t, setup{rpc: rpc.Options{Pending: pending}})
			ctx, _ := headers(context.Background(), tc.header...)
			_, err = f.agent.SendMcpClientInfo(ctx, &pb.McpClientInfoRequest{UserToken: tokA})
			if got := codeOf(err); got != tc.want {
				t.Fatalf("code %s (%v), want %s", got, err, tc.want)
			}
			var ce *connect.Error
			if err != nil && (!errors.As(err, &ce) || ce.Meta().Get("Retry-After") != "1") {
				t.Fatalf("no Retry-After: %v", err)
			}
			if n := pending.Len(); n != 1 {
				t.Fatalf("%d connections wait after the call, want the holder alone", n)
			}
		})
	}
}

// TestWaitingCallGivesWay: a call without a header token whose message is
// still arriving holds its place among those waiting to log in; a newer
// one from the same address, when no place is free, takes it: the older
// call ends unavailable, saying why, and the newer one is answered and
// gives its place back once its token proves valid.
func TestWaitingCallGivesWay(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		pending := auth.NewPending(1, 1)
		f := start(t, setup{rpc: rpc.Options{Pending: pending}})

		// The first call's body: its first half, then nothing.
		msg, err := proto.Marshal(&pb.McpClientInfoRequest{UserToken: tokA})
		if err != nil {
			t.Fatal(err)
		}
		body, send := io.Pipe()
		defer send.Close()
		req, err := http.NewRequest(http.MethodPost, baseURL+"/agentassistproto.SrvAgentAssist/SendMcpClientInfo", body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/proto")
		first := make(chan *http.Response, 1)
		go func() {
			resp, err := f.http.Do(req)
			if err != nil {
				t.Error(err)
			}
			first <- resp
		}()
		go func() { _, _ = send.Write(msg[:len(msg)/2]) }()
		synctest.Wait()
		if n := pending.Len(); n != 1 {
			t.Fatalf("%d calls wait to log in, want the first", n)
		}

		if _, err := f.agent.SendMcpClientInfo(context.Background(), &pb.McpClientInfoRequest{UserToken: tokA}); err != nil {
			t.Fatalf("the newer call: %v", err)
		}
		resp := <-first
		if resp == nil {
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable || !bytes.Contains(b, []byte("given to a newer one")) {
			t.Fatalf("the first call: %d %s", resp.StatusCode, b)
		}
		if n := pending.Len(); n != 0 {
			t.Fatalf("%d calls still wait to log in", n)
		}
	})
}
