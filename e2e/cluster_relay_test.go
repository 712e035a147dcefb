package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nats-io/nats.go"

	"github.com/agentassistant/agentassistant/internal/testhost"
)

// Relay sessions across the instances of a cluster: the host on one, its
// agents on others.

// relayPeer is a bare /agent/ws peer: it joins and reads envelopes.
type relayPeer struct {
	t          *testing.T
	ws         *websocket.Conn
	hostOnline bool // said relay.joined
}

type relayEnv struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	ReplyTo string          `json:"replyTo"`
	Payload json.RawMessage `json:"payload"`
}

func joinRelay(t *testing.T, s *server, role string) *relayPeer {
	t.Helper()
	return joinRelaySession(t, s, role, "")
}

func joinRelaySession(t *testing.T, s *server, role, session string) *relayPeer {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(strings.Replace(s.URL, "http", "ws", 1)+"/agent/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	p := &relayPeer{t: t, ws: ws}
	p.send("relay.join", "join-1", map[string]any{"role": role, "token": tokenA, "sessionId": session})
	e := p.expect("relay.joined", 10*time.Second)
	if e.ReplyTo != "join-1" {
		t.Fatalf("joined = %+v", e)
	}
	p.hostOnline = strings.Contains(string(e.Payload), `"hostOnline":true`)
	return p
}

func (p *relayPeer) send(typ, id string, payload any) {
	p.t.Helper()
	m := map[string]any{"v": "mvp-0.2", "type": typ, "payload": payload}
	if id != "" {
		m["id"] = id
	}
	if err := p.ws.WriteJSON(m); err != nil {
		p.t.Fatal(err)
	}
}

func (p *relayPeer) next(d time.Duration) (relayEnv, error) {
	_ = p.ws.SetReadDeadline(time.Now().Add(d))
	var e relayEnv
	err := p.ws.ReadJSON(&e)
	return e, err
}

// expect reads until an envelope of typ, skipping others.
func (p *relayPeer) expect(typ string, d time.Duration) relayEnv {
	p.t.Helper()
	for {
		e, err := p.next(d)
		if err != nil {
			p.t.Fatalf("waiting for %s: %v", typ, err)
		}
		if e.Type == typ {
			return e
		}
	}
}

var sessionID = regexp.MustCompile(`s-\d{8}-\d{3}`)

// readLog reads a study log: the events' directions and types in order;
// it checks every line's session and that the event index counts up.
func readLog(t *testing.T, path, sid string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), tokenA) || strings.Contains(string(raw), "secret-seat-map") {
		t.Error("study log holds the token or backendData")
	}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(nil, 1<<20)
	for i := 0; sc.Scan(); i++ {
		var e struct {
			SessionID  string `json:"sessionId"`
			EventIndex int    `json:"eventIndex"`
			Direction  string `json:"direction"`
			Type       string `json:"type"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s line %d: %v", path, i, err)
		}
		if e.SessionID != sid || e.EventIndex != i {
			t.Errorf("%s line %d: %s", path, i, sc.Bytes())
		}
		out = append(out, e.Direction+" "+e.Type)
	}
	return out
}

func count(events []string, ev string) int {
	n := 0
	for _, e := range events {
		if e == ev {
			n++
		}
	}
	return n
}

// TestClusterRelayAcrossInstances: the booking host is on instance A, the
// MCP agent's calls land on B, and an /agent/ws agent comes in through the
// balancer onto C (the balancer's third connection). Tool calls and their
// results, state updates, agent and user messages, and the study session
// cross NATS; the study log, on A, has all of it in order.
func TestClusterRelayAcrossInstances(t *testing.T) {
	c := startCluster(t)
	// Everything that crosses NATS, to check the token never does.
	nc, err := nats.Connect(c.nats.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var seen atomic.Int64
	var leaked atomic.Bool
	if _, err := nc.Subscribe(">", func(m *nats.Msg) {
		seen.Add(1)
		if strings.Contains(m.Subject, tokenA) || strings.Contains(string(m.Data), tokenA) {
			leaked.Store(true)
		}
	}); err != nil {
		t.Fatal(err)
	}
	h := joinHost(t, c.srvs[0], testhost.Options{})
	// Round robin: the balancer's first connection goes to A, the second
	// to B, the third to C.
	joinRelay(t, c.lb, "agent").ws.Close()
	joinRelay(t, c.lb, "agent").ws.Close()
	watcher := joinRelay(t, c.lb, "agent")
	agent := startMCP(t, c.srvs[1], tokenA)

	out := step(t, agent, "start_session", map[string]any{"study_id": "pilot", "participant_id": "P1"}, false, "Study session s-")
	sid := sessionID.FindString(out)
	if e := watcher.expect("session.started", 10*time.Second); !strings.Contains(string(e.Payload), sid) {
		t.Fatalf("session.started on C = %s", e.Payload)
	}
	step(t, agent, "get_ui_state", nil, false, "stage: movie", "study session: "+sid)
	step(t, agent, "call_ui_tool", map[string]any{"tool_name": "select", "params": map[string]any{"itemId": "m1"}, "reason": "they asked for Dune"},
		false, `"movie":"m1"`)
	step(t, agent, "call_ui_tool", map[string]any{"tool_name": "next", "params": map[string]any{}, "reason": "pick a date"}, false, "stage: date")
	// C's agent saw the host's state change.
	for {
		e := watcher.expect("state.updated", 10*time.Second)
		if strings.Contains(string(e.Payload), `"stage":"date"`) {
			break
		}
	}
	// The agent on C calls a tool too; its answer comes back to it alone.
	watcher.send("tool.call", "c-1", map[string]any{"toolName": "select", "params": map[string]any{"itemId": "d2"}, "reason": "Saturday"})
	if e := watcher.expect("tool.result", 10*time.Second); e.ReplyTo != "c-1" || !strings.Contains(string(e.Payload), `"ok":true`) {
		t.Fatalf("C's tool.result = %+v", e)
	}
	step(t, agent, "send_agent_message", map[string]any{"text": "Saturday it is."}, false, "posted")
	h.SayUser("Evening, please.")
	step(t, agent, "wait_user_message", map[string]any{"timeout": 10}, false, "The participant wrote: Evening, please.")
	if e := watcher.expect("user.message", 10*time.Second); !strings.Contains(string(e.Payload), "Evening, please.") {
		t.Fatalf("user.message on C = %s", e.Payload)
	}
	step(t, agent, "end_session", map[string]any{"reason": "done"}, false, "Study session "+sid+" ended", "logs/study/"+sid+".jsonl")

	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if leaked.Load() || seen.Load() == 0 {
		t.Errorf("%d NATS messages seen, the token in one: %v", seen.Load(), leaked.Load())
	}
	events := readLog(t, filepath.Join(c.srvs[0].Data, "logs", "study", sid+".jsonl"), sid)
	for ev, min := range map[string]int{"in session.start": 1, "out session.started": 1, "in tool.call": 3, "out tool.result": 3,
		"out state.updated": 3, "in agent.message": 1, "out user.message": 1, "in session.end": 1, "out session.ended": 1} {
		if count(events, ev) < min {
			t.Errorf("A's log has %d %q, want at least %d: %v", count(events, ev), ev, min, events)
		}
	}
	for _, s := range c.srvs[1:] {
		if _, err := os.Stat(filepath.Join(s.Data, "logs", "study", sid+".jsonl")); err == nil {
			t.Errorf("a study log on an instance without the host: %s", s.Data)
		}
	}
}

// TestClusterRelayNewestHostTakesOver: a host joins on C while the first
// is on A, mid study session: A's host is told it was replaced and closed,
// the agent's calls (through B) reach the new host, and the study session
// goes on: A's log up to the move, C's from it.
func TestClusterRelayNewestHostTakesOver(t *testing.T) {
	c := startCluster(t)
	first := joinHost(t, c.srvs[0], testhost.Options{})
	agent := startMCP(t, c.srvs[1], tokenA)
	sid := sessionID.FindString(step(t, agent, "start_session", nil, false, "Study session s-"))
	step(t, agent, "call_ui_tool", map[string]any{"tool_name": "select", "params": map[string]any{"itemId": "m1"}, "reason": "r"}, false)

	second := joinHost(t, c.srvs[2], testhost.Options{})
	select {
	case <-first.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first host was not closed")
	}
	var replaced bool
	for _, m := range first.Seen() {
		replaced = replaced || m["type"] == "relay.replaced"
	}
	if !replaced {
		t.Fatalf("the first host was not told: %v", first.Seen())
	}
	// The new host is the one answering (its booking starts afresh). Until
	// the agent's instance hears of the move, a call may still go to the
	// first host and come back "the host was replaced": asked again, it
	// reaches the new one.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := callTool(ctx, agent, "get_ui_state", nil)
		cancel()
		if err != nil {
			t.Fatalf("get_ui_state: %v", err)
		}
		txt := resultText(r)
		if r.IsError && !strings.Contains(txt, "replaced") {
			t.Fatalf("get_ui_state while the host moves: %s", txt)
		}
		if !r.IsError && strings.Contains(txt, "study session: "+sid) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	step(t, agent, "call_ui_tool", map[string]any{"tool_name": "select", "params": map[string]any{"itemId": "m2"}, "reason": "r"}, false, `"movie":"m2"`)
	var calls int
	for _, m := range second.Seen() {
		if m["type"] == "tool.call" {
			calls++
		}
	}
	if calls != 1 {
		t.Fatalf("the new host got %d tool calls", calls)
	}
	step(t, agent, "end_session", nil, false, "Study session "+sid+" ended")

	onA := readLog(t, filepath.Join(c.srvs[0].Data, "logs", "study", sid+".jsonl"), sid)
	onC := readLog(t, filepath.Join(c.srvs[2].Data, "logs", "study", sid+".jsonl"), sid)
	if count(onA, "in tool.call") != 1 || count(onA, "internal relay.host.moved") != 1 || count(onA, "out session.ended") != 0 {
		t.Errorf("A's part: %v", onA)
	}
	if len(onC) == 0 || onC[0] != "internal relay.host.moved" || count(onC, "in tool.call") != 1 || count(onC, "out session.ended") != 1 {
		t.Errorf("C's part: %v", onC)
	}
}

// TestClusterRelayHostInstanceKilled: the host on A has a tool call from
// the agent on B when A is killed (kill -9): the agent is told, as when a
// host disconnects, and what A relayed before is in its log on disk.
func TestClusterRelayHostInstanceKilled(t *testing.T) {
	c := startCluster(t)
	host := joinRelay(t, c.srvs[0], "host")
	host.send("state.updated", "", map[string]any{"uiSpec": map[string]any{"stage": "movie"},
		"toolSchema": []any{map[string]any{"name": "select", "description": "choose", "parameters": map[string]any{"type": "object"}}}})
	agent := joinRelay(t, c.srvs[1], "agent")
	if !agent.hostOnline {
		// B learns where the host is from the bucket's watch: soon.
		for {
			if e := agent.expect("relay.presence", 10*time.Second); strings.Contains(string(e.Payload), `"host":true`) {
				break
			}
		}
	}
	agent.send("session.start", "s-1", map[string]any{})
	start := host.expect("session.start", 10*time.Second)
	var sp struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(start.Payload, &sp)
	_ = host.ws.WriteJSON(map[string]any{"v": "mvp-0.2", "type": "session.started", "replyTo": start.ID, "payload": map[string]any{}})
	agent.expect("session.started", 10*time.Second)

	agent.send("tool.call", "t-1", map[string]any{"toolName": "select", "params": map[string]any{"itemId": "m1"}, "reason": "r"})
	if e := host.expect("tool.call", 10*time.Second); !strings.Contains(string(e.Payload), `"m1"`) {
		t.Fatalf("host got %s", e.Payload)
	}
	c.srvs[0].kill9(t)
	for {
		e, err := agent.next(20 * time.Second)
		if err != nil {
			t.Fatalf("the agent was never told: %v", err)
		}
		if e.Type == "error" && e.ReplyTo == "t-1" {
			if !strings.Contains(string(e.Payload), "the host disconnected before answering; the action may or may not have happened") {
				t.Fatalf("error = %s", e.Payload)
			}
			break
		}
	}
	// The agent hears the host is gone, and a new call says no host.
	agent.send("tool.call", "t-2", map[string]any{"toolName": "select", "params": map[string]any{"itemId": "m2"}, "reason": "r"})
	for {
		e, err := agent.next(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "error" && e.ReplyTo == "t-2" {
			if !strings.Contains(string(e.Payload), "NO_ACTIVE_SPEC") {
				t.Fatalf("error = %s", e.Payload)
			}
			break
		}
	}
	events := readLog(t, filepath.Join(c.srvs[0].Data, "logs", "study", sp.SessionID+".jsonl"), sp.SessionID)
	if count(events, "in session.start") != 1 || count(events, "in tool.call") != 1 {
		t.Errorf("A's log: %v", events)
	}
}

// TestClusterRelayStudyIDsUnique: study sessions started on two instances
// the same day get two ids (each instance numbers them in its own
// directory, the cluster keeps them apart), so one that moves never
// writes into the other's log.
func TestClusterRelayStudyIDsUnique(t *testing.T) {
	c := startCluster(t)
	var ids []string
	for i, name := range []string{"one", "two"} {
		joinHost(t, c.srvs[i], testhost.Options{Session: name})
		agent := joinRelaySession(t, c.srvs[i], "agent", name)
		agent.send("session.start", "s", map[string]any{})
		e := agent.expect("session.started", 10*time.Second)
		ids = append(ids, sessionID.FindString(string(e.Payload)))
	}
	if ids[0] == "" || ids[0] == ids[1] {
		t.Fatalf("study session ids %v", ids)
	}
}
