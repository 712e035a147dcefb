package rpc_test

import (
	"context"
	"strings"
	"testing"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// TestTokenIsChecked: every call presents one valid token, in its header
// (X-Agentassistant-Token or a bearer Authorization), inside its message
// (UserToken, as upstream's clients send it), or in several of these
// places alike; a missing, wrong or conflicting one is Unauthenticated.
func TestTokenIsChecked(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	for _, tc := range []struct {
		name    string
		header  []string // request headers, name and value
		message string   // the message's UserToken
		want    string   // the code
		says    string   // in the error, when refused
	}{
		{name: "no token", want: "unauthenticated", says: "missing or invalid token"},
		{name: "a wrong token inside the message", message: "not-a-token", want: "unauthenticated", says: "missing or invalid token"},
		{name: "a wrong token in the header", header: []string{auth.TokenHeader, "not-a-token"}, want: "unauthenticated", says: "missing or invalid token"},
		{name: "a wrong bearer token", header: []string{"Authorization", "Bearer not-a-token"}, want: "unauthenticated"},
		{name: "a token that is only a prefix of one", message: tokA[:len(tokA)-1], want: "unauthenticated"},
		{name: "the token inside the message", message: tokA, want: "ok"},
		{name: "the token in the header", header: []string{auth.TokenHeader, tokA}, want: "ok"},
		{name: "a bearer token", header: []string{"Authorization", "Bearer " + tokA}, want: "ok"},
		{name: "the same token in the header and the message", header: []string{auth.TokenHeader, tokA}, message: tokA, want: "ok"},
		{name: "two valid tokens, header and message", header: []string{auth.TokenHeader, tokA}, message: tokB, want: "unauthenticated", says: "conflicting tokens"},
		{name: "two valid tokens, two headers", header: []string{auth.TokenHeader, tokA, "Authorization", "Bearer " + tokB}, want: "unauthenticated", says: "conflicting tokens"},
		// Refused by the header alone, before the message is read.
		{name: "a wrong header token beside a valid message token", header: []string{auth.TokenHeader, "not-a-token"}, message: tokA, want: "unauthenticated", says: "missing or invalid token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, _ := headers(context.Background(), tc.header...)
			resp, err := f.agent.SendMcpClientInfo(ctx, &pb.McpClientInfoRequest{UserToken: tc.message,
				Request: &pb.McpClientInfoData{ClientName: "claude-code"}})
			if got := codeOf(err); got != tc.want {
				t.Fatalf("code %s (%v), want %s", got, err, tc.want)
			}
			if err == nil && !resp.GetSuccess() {
				t.Fatalf("response %v", resp)
			}
			if err != nil && !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q does not say %q", err, tc.says)
			}
		})
	}
}
