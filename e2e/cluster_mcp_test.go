package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// TestClusterMCPBehindBalancer: an agent uses /mcp (Streamable HTTP)
// through a round-robin balancer that sends each of its connections to
// the next instance (the client opens one per request), with no
// affinity; it initializes, lists the tools and asks several times, and
// a device on one instance answers: every call has its answer.
func TestClusterMCPBehindBalancer(t *testing.T) {
	c := startCluster(t)
	device := dial(t, c.srvs[2], tokenA, "phone")
	perRequest := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	tr, err := transport.NewStreamableHTTP(c.lb.URL+"/mcp",
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + tokenA}),
		transport.WithHTTPBasicClient(perRequest))
	if err != nil {
		t.Fatal(err)
	}
	agent := client.NewClient(tr, client.WithProtocolVersion("2025-11-25"))
	t.Cleanup(func() { agent.Close() })
	ctx := context.Background()
	if err := agent.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "e2e-http", Version: "1"}
	if _, err := agent.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	tools, err := agent.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	if !slices.ContainsFunc(tools.Tools, func(tl mcp.Tool) bool { return tl.Name == "ask_question" }) {
		t.Fatalf("tools = %v", tools.Tools)
	}
	for i := range 4 {
		question, answer := fmt.Sprintf("Question %d?", i), fmt.Sprintf("Answer %d", i)
		type result struct {
			r   *mcp.CallToolResult
			err error
		}
		done := make(chan result, 1)
		go func() {
			r, err := callTool(ctx, agent, "ask_question", map[string]any{"question": question})
			done <- result{r, err}
		}()
		q := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
		if q.GetRequest().GetQuestion() != question {
			t.Fatalf("call %d: the device has %v", i, q)
		}
		if q.GetRequest().GetMcpClientName() != "e2e-http" {
			t.Errorf("call %d: client name %q", i, q.GetRequest().GetMcpClientName())
		}
		if err := device.Send(wstest.TextReply(q.GetID(), answer)); err != nil {
			t.Fatal(err)
		}
		select {
		case res := <-done:
			if res.err != nil {
				t.Fatalf("call %d: %v", i, res.err)
			}
			if res.r.IsError || resultText(res.r) != answer {
				t.Fatalf("call %d: result %+v", i, res.r)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("call %d: the agent never got the answer", i)
		}
	}
}
