// Package mcpbridge is agentassistant-mcp's MCP server: the tools an LLM
// client sees, each backed by a call to agentassistant-srv (Backend):
// over Connect from agentassistant-mcp, in process from the server's own
// /mcp endpoint.
package mcpbridge

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/agentassistant/agentassistant/gen/agentassistproto/agentassistprotoconnect"
	"github.com/agentassistant/agentassistant/internal/opt"
)

// Options configure the bridge.
type Options struct {
	// Backend reaches the server in process, in place of the Connect
	// clients below (Client, Control, Reply, UI) and Probe: every tool
	// is offered, and an error is the server's, never a broken link's.
	Backend Backend
	// Client reaches agentassistant-srv over Connect. Required without
	// Backend.
	Client agentassistprotoconnect.SrvAgentAssistClient
	// Control withdraws requests when the MCP client cancels (nil: a
	// cancelled request is withdrawn after the server's orphan grace) and
	// fetches the answers given while no agent waited (nil: none).
	Control agentassistprotoconnect.SrvAgentAssistControlClient
	// Done is closed when the MCP session ends (stdin closed, the process
	// stopping). Calls it cuts short leave their requests pending, so the
	// person can still answer and the next agentassistant-mcp of the
	// project gets the answer; nil: every cut-short call withdraws its
	// request.
	Done <-chan struct{}
	// Reply puts an answer in for the person (SrvAgentAssistReply). With
	// it, ask_question and task_finish are also offered as a form in MCP
	// clients that support elicitation, while they wait in the inbox; the
	// first answer wins (nil: the inbox only).
	Reply agentassistprotoconnect.SrvAgentAssistReplyClient
	// Stopped says what stopped, to an agent whose call Done cut short
	// (default "agentassistant-mcp stopped").
	Stopped string
	// Hooks are the MCP server's hooks, for a caller that follows its
	// sessions; the bridge adds its own (nil: the bridge's only).
	Hooks *server.Hooks
	// UI reaches the server's relay; nil leaves out the web UI tools.
	UI agentassistprotoconnect.SrvUIRelayClient
	// RelaySession is the relay session to act in ("" is "default").
	RelaySession string
	// Token is sent as UserToken with every request.
	Token string
	// ServerURL is the server's base URL, used in messages to the agent
	// ("could not reach http://127.0.0.1:22080").
	ServerURL string
	Logger    *slog.Logger
	// Version is reported to the MCP client.
	Version string
	// ProjectDirectory is used when a call names none (default: none).
	ProjectDirectory string

	// ProgressInterval is how often a waiting call sends progress to a
	// client that asked for it with a progressToken (default 10s).
	ProgressInterval time.Duration
	// Reconnect is the backoff while the server is away mid-call
	// (default 1s, doubling up to maxReconnect).
	Reconnect time.Duration
	// FirstContact is how long a call keeps trying a server it has not
	// reached yet before saying it cannot (default 5s).
	FirstContact time.Duration
	// HostGrace is how long the web UI's own tools stay listed after its
	// host (the booking page) went away: a reload or a network blip keeps
	// them; past it they leave the tool list until the host returns
	// (default 2m, the server's own grace for a study session's host).
	HostGrace time.Duration
	// HostPoll is how often Run looks at the host's presence (default 5s).
	HostPoll time.Duration
	// Probe checks that the server a waiting question is on still answers
	// (stall.go); skip moves the next calls on from that server. nil: not
	// checked. ProbeEvery spaces the checks (default 2s).
	Probe      func(context.Context) (skip func(), err error)
	ProbeEvery time.Duration
}

func (o *Options) defaults() {
	opt.Logger(&o.Logger)
	opt.Default(&o.Version, "dev")
	opt.Default(&o.Stopped, "agentassistant-mcp stopped")
	opt.Default(&o.ProgressInterval, 10*time.Second)
	opt.Default(&o.Reconnect, time.Second)
	opt.Default(&o.FirstContact, 5*time.Second)
	opt.Default(&o.HostGrace, 2*time.Minute)
	opt.Default(&o.HostPoll, 5*time.Second)
	opt.Default(&o.ProbeEvery, 2*time.Second)
}

// Server is the MCP server with its tools. Run keeps the web UI's tools in
// step with its host.
type Server struct {
	*server.MCPServer
	b  *bridge
	ui *uiTools // nil without Options.UI or Backend
}

// New returns the MCP server with its tools registered.
func New(o Options) *Server {
	o.defaults()
	hooks := o.Hooks
	if hooks == nil {
		hooks = &server.Hooks{}
	}
	s := server.NewMCPServer("agentassistant", o.Version,
		server.WithToolCapabilities(true),
		server.WithInstructions(instructions),
		server.WithHooks(hooks),
	)
	b := newBridge(o)
	b.register(s)
	out := &Server{MCPServer: s, b: b}
	if o.Backend != nil || o.UI != nil {
		u := &uiTools{b: b, srv: s, registered: make(map[string]bool), unlisted: make(map[string]bool)}
		u.register()
		// Before every tools/list, learn the host tools the server has
		// seen, so clients that list once still see all it knows.
		hooks.AddBeforeListTools(func(ctx context.Context, _ any, _ *mcp.ListToolsRequest) { u.refresh(ctx) })
		u.refresh(context.Background()) // and once now, for clients that call before listing
		out.ui = u
	}
	return out
}

// Run follows the web UI's host until ctx ends, every HostPoll: its tools
// leave the tool list once it has been gone for HostGrace and come back
// when it returns, each change announced with tools/list_changed. Without
// a UI it only waits for ctx.
func (s *Server) Run(ctx context.Context) error {
	if s.ui == nil {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(s.ui.b.o.HostPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.ui.refresh(ctx)
		}
	}
}

const instructions = `agentassistant connects you with the person you work for, on their PC or phone.
Use ask_question whenever you need a decision, a clarification or information only they have, instead of guessing or stopping.
Use task_finish (or work_report, the same tool under the name older agentassistant rules use) when you have completed the task, with a summary, to get their feedback or next instruction.
Both tools wait until the person answers; the answer is the tool result.
When a web UI (the booking host) is connected, get_ui_state shows what the participant sees and its own tools (select, next, ...) act on it; every UI action needs a reason.`

type bridge struct {
	o   Options
	log *slog.Logger
	be  Backend
	// linked: the backend reaches the server over a link (Connect), so an
	// error may be the link's rather than the server's.
	linked bool
	// replies: the backend can put the person's answer in (a form's).
	replies bool

	mu      sync.Mutex
	waiting map[string]struct{} // request IDs of the calls waiting now

	// formSlot is held by the one form (elicitation) open in the client at
	// a time; formSeq, guarded by it, follows the JSON-RPC id the MCP
	// library gives each one (see offerInClient).
	formSlot chan struct{}
	formSeq  int64
}

func newBridge(o Options) *bridge {
	b := &bridge{o: o, log: o.Logger, be: o.Backend, replies: o.Backend != nil || o.Reply != nil,
		waiting: make(map[string]struct{}), formSlot: make(chan struct{}, 1)}
	if b.be != nil {
		b.o.Probe = nil // no link to a server that could stall
	} else {
		b.be = &connectBackend{client: o.Client, control: o.Control, reply: o.Reply, SrvUIRelayClient: o.UI, serverURL: o.ServerURL, log: o.Logger}
		b.linked = true
	}
	return b
}

const (
	// defaultTimeout applies when a call gives none.
	defaultTimeout = 600 * time.Second
	// minTimeout and maxTimeout clamp a call's timeout: an LLM asking
	// for one second must not make the tool useless.
	minTimeout, maxTimeout = 60 * time.Second, 24 * time.Hour
	// maxReconnect bounds the doubling of Options.Reconnect.
	maxReconnect = 30 * time.Second
)

// callTimeout turns the seconds an LLM passed into the duration to wait.
func callTimeout(sec float64) time.Duration {
	if sec <= 0 {
		return defaultTimeout
	}
	return clampSeconds(sec, minTimeout, maxTimeout)
}
