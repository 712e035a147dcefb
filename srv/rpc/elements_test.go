package rpc_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// TestMessageOfMillionsOfEmptyItemsRefused: an agent with the token
// asks with 2.5 million empty Questions (binary, a message of 5 MB) or
// 1.7 million (JSON, 5 MB), under the message bound. Decoded, either is
// some hundreds of MiB of structs; the server refuses it from its bytes,
// with invalid_argument saying why, without decoding it.
func TestMessageOfMillionsOfEmptyItemsRefused(t *testing.T) {
	const questions = 7 // McpAskQuestionRequest.Questions
	var items []byte
	for range 2_500_000 {
		items = protowire.AppendTag(items, questions, protowire.BytesType)
		items = protowire.AppendVarint(items, 0)
	}
	head, err := proto.Marshal(&pb.AskQuestionRequest{ID: "q1"})
	if err != nil {
		t.Fatal(err)
	}
	binary := protowire.AppendBytes(protowire.AppendTag(head, 3, protowire.BytesType), items) // AskQuestionRequest.Request
	var check pb.AskQuestionRequest
	if err := proto.Unmarshal(binary, &check); err != nil || len(check.GetRequest().GetQuestions()) != 2_500_000 {
		t.Fatalf("the message is not what the test means: %d questions, %v", len(check.GetRequest().GetQuestions()), err)
	}
	check.Reset()
	text := []byte(`{"ID":"q1","Request":{"Questions":[{}` + strings.Repeat(`,{}`, 1_700_000) + `]}}`)
	if !json.Valid(text) {
		t.Fatal("the JSON is not valid")
	}

	for _, tc := range []struct {
		name, contentType string
		body              []byte
	}{
		{"binary", "application/proto", binary},
		{"JSON", "application/json", text},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := start(t, setup{})
				req, err := http.NewRequest(http.MethodPost, baseURL+agentassistprotoconnect.SrvAgentAssistAskQuestionProcedure, bytes.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", tc.contentType)
				req.Header.Set(auth.TokenHeader, tokA)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				resp, err := f.http.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				runtime.ReadMemStats(&after)
				allocated := (after.TotalAlloc - before.TotalAlloc) >> 20
				t.Logf("a message of %d KiB: %d MiB allocated while it was handled; %d %s", len(tc.body)>>10, allocated, resp.StatusCode, body)
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid_argument") || !strings.Contains(string(body), "more than") {
					t.Errorf("answered %d %s", resp.StatusCode, body)
				}
				if allocated > 64 {
					t.Errorf("%d MiB allocated for a message of %d KiB", allocated, len(tc.body)>>10)
				}
			})
		})
	}
}
