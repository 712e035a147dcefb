package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/balancer"
	"github.com/agentassistant/agentassistant/internal/natstest"
	"github.com/agentassistant/agentassistant/internal/wstest"
)

// A cluster: a real NATS server with JetStream (in this process), three
// agentassistant-srv processes in cluster mode, and a round-robin TCP
// balancer in front of them.
type cluster struct {
	nats *natstest.Server
	srvs []*server
	lb   *server // the balancer, as a server address
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	ns := natstest.Start(t)
	c := &cluster{nats: ns}
	var addrs []string
	for _, name := range []string{"a", "b", "c"} {
		s := startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URL(), "-instance", name}, tokenA)
		c.srvs = append(c.srvs, s)
		addrs = append(addrs, net.JoinHostPort(s.Host, s.Port))
	}
	lb, err := balancer.Start(addrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	host, port, _ := net.SplitHostPort(lb.Addr())
	c.lb = &server{URL: "http://" + lb.Addr(), Host: host, Port: port, Token: tokenA}
	return c
}

// servers is the -server list of the three instances.
func (c *cluster) servers() string {
	var out []string
	for _, s := range c.srvs {
		out = append(out, net.JoinHostPort(s.Host, s.Port))
	}
	return strings.Join(out, ",")
}

func askClient(s *server) agentassistprotoconnect.SrvAgentAssistClient {
	return agentassistprotoconnect.NewSrvAgentAssistClient(asAgent, s.URL)
}

func connectAsk(ctx context.Context, s *server, id, question string) (*pb.AskQuestionResponse, error) {
	return askClient(s).AskQuestion(ctx, &pb.AskQuestionRequest{ID: id, UserToken: tokenA,
		Request: &pb.McpAskQuestionRequest{ProjectDirectory: "/src", Question: question, Timeout: 60}})
}

// TestClusterAskAcrossInstances: three devices come in through the
// balancer (one on each instance), and so does the agent; every device
// gets the question, one answers, the agent has the answer, the others
// are told.
func TestClusterAskAcrossInstances(t *testing.T) {
	c := startCluster(t)
	var devices []*wstest.Client
	for i := range 3 {
		devices = append(devices, dial(t, c.lb, tokenA, fmt.Sprint("device-", i)))
	}
	agent := startMCP(t, c.lb, tokenA)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := callTool(context.Background(), agent, "ask_question", map[string]any{"question": "Which database?"})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	var id string
	for _, d := range devices {
		q := must[*pb.WebsocketMessage](t)(d.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest()
		if q.GetRequest().GetQuestion() != "Which database?" {
			t.Fatalf("question = %v", q)
		}
		id = q.GetID()
	}
	if err := devices[1].Send(wstest.TextReply(id, "PostgreSQL")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r == nil || r.IsError || resultText(r) != "PostgreSQL" {
			t.Fatalf("result = %+v", r)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the agent never got the answer")
	}
	for _, d := range []*wstest.Client{devices[0], devices[2]} {
		n := must[*pb.WebsocketMessage](t)(d.Expect("AskQuestionReplyNotification", 5*time.Second))
		if n.GetAskQuestionRequest().GetID() != id {
			t.Fatalf("notification = %v", n)
		}
	}
}

// TestClusterFirstReplyWins: in every trial, two devices on two instances
// answer at the same moment; exactly one answer is taken, the other
// device is told (not_pending), and the agent on the third instance has
// the one taken.
func TestClusterFirstReplyWins(t *testing.T) {
	c := startCluster(t)
	d1, d2 := dial(t, c.srvs[1], tokenA, "one"), dial(t, c.srvs[2], tokenA, "two")
	for i := range 30 {
		id := fmt.Sprint("race-", i)
		type res struct {
			r   *pb.AskQuestionResponse
			err error
		}
		done := make(chan res, 1)
		go func() {
			r, err := connectAsk(context.Background(), c.srvs[0], id, "Race?")
			done <- res{r, err}
		}()
		must[*pb.WebsocketMessage](t)(d1.Expect("AskQuestion", 10*time.Second))
		must[*pb.WebsocketMessage](t)(d2.Expect("AskQuestion", 10*time.Second))
		var wg sync.WaitGroup
		for j, d := range []*wstest.Client{d1, d2} {
			wg.Go(func() {
				if err := d.Send(wstest.TextReply(id, fmt.Sprint("answer ", j))); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		var r res
		select {
		case r = <-done:
		case <-time.After(15 * time.Second):
			t.Fatalf("trial %d: no answer", i)
		}
		if r.err != nil {
			t.Fatalf("trial %d: %v", i, r.err)
		}
		won := r.r.GetContents()[0].GetText().GetText()
		loser := d2
		if won == "answer 1" {
			loser = d1
		} else if won != "answer 0" {
			t.Fatalf("trial %d: agent got %q", i, won)
		}
		// The loser hears the winner's answer and that its own came late.
		var notified, refused bool
		for !notified || !refused {
			m, err := loser.Next(10 * time.Second)
			if err != nil {
				t.Fatalf("trial %d: loser: %v", i, err)
			}
			switch m.Cmd {
			case "AskQuestionReplyNotification":
				notified = true
			case "Error":
				if m.GetError().GetCode() != "not_pending" {
					t.Fatalf("trial %d: loser's error %v", i, m.GetError())
				}
				refused = true
			case "UserConnectionStatusNotification":
			default:
				t.Fatalf("trial %d: loser got %s", i, m.Cmd)
			}
		}
	}
}

// TestClusterKill9MidCall: the agent waits through instance A; A is
// killed (kill -9); the device on B answers; the agent's call re-attaches
// through the next instance and has the answer.
func TestClusterKill9MidCall(t *testing.T) {
	c := startCluster(t)
	device := dial(t, c.srvs[1], tokenA, "phone")
	agent := startMCP(t, c.srvs[0], tokenA, "-server", c.servers())
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := callTool(context.Background(), agent, "ask_question", map[string]any{"question": "Deploy now?"})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	id := must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second)).GetAskQuestionRequest().GetID()
	c.srvs[0].kill9(t)
	if err := device.Send(wstest.TextReply(id, "Yes, deploy.")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r == nil || r.IsError || resultText(r) != "Yes, deploy." {
			t.Fatalf("result = %+v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent never got the answer")
	}
}

// TestClusterNATSRestarted: NATS goes away and comes back mid-call (its
// data kept); the question still pending is answered afterwards and the
// answer reaches the agent on another instance.
func TestClusterNATSRestarted(t *testing.T) {
	c := startCluster(t)
	device := dial(t, c.srvs[2], tokenA, "phone")
	type res struct {
		r   *pb.AskQuestionResponse
		err error
	}
	done := make(chan res, 1)
	go func() {
		r, err := connectAsk(context.Background(), c.srvs[0], "across-restart", "Still there?")
		done <- res{r, err}
	}()
	must[*pb.WebsocketMessage](t)(device.Expect("AskQuestion", 10*time.Second))
	c.nats.Restart()
	// Until the instances are back on NATS an answer is refused as not
	// saved (and the question stays); the device tries again.
	for try := 0; ; try++ {
		if err := device.Send(wstest.TextReply("across-restart", "Yes.")); err != nil {
			t.Fatal(err)
		}
		m, err := device.Next(15 * time.Second)
		if err != nil {
			break // nothing back: the answer was taken
		}
		if m.Cmd == "Error" && m.GetError().GetCode() != "not_pending" && try < 100 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		t.Fatalf("answer after the restart: %v", m)
	}
	select {
	case r := <-done:
		if r.err != nil || r.r.GetContents()[0].GetText().GetText() != "Yes." {
			t.Fatalf("Ask = %v, %v", r.r, r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the agent never got the answer")
	}
}
