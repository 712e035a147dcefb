// Package srv composes agentassistant-srv's single http.Handler: the Connect
// services, /ws, /agent/ws, the token-protected HTTP endpoints and the
// embedded UI, behind the Host guard.
package srv

import (
	"errors"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/agentassistant/agentassistant/internal/opt"
	"github.com/agentassistant/agentassistant/mcpbridge"
	"github.com/agentassistant/agentassistant/srv/agui"
	"github.com/agentassistant/agentassistant/srv/answercap"
	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/catalog"
	"github.com/agentassistant/agentassistant/srv/channel"
	"github.com/agentassistant/agentassistant/srv/cluster"
	"github.com/agentassistant/agentassistant/srv/hub"
	"github.com/agentassistant/agentassistant/srv/inbox"
	"github.com/agentassistant/agentassistant/srv/ingress"
	"github.com/agentassistant/agentassistant/srv/mcphttp"
	"github.com/agentassistant/agentassistant/srv/metrics"
	"github.com/agentassistant/agentassistant/srv/push"
	"github.com/agentassistant/agentassistant/srv/relay"
	"github.com/agentassistant/agentassistant/srv/rpc"
	"github.com/agentassistant/agentassistant/srv/store"
	"github.com/agentassistant/agentassistant/srv/studylog"
	"github.com/agentassistant/agentassistant/srv/webui"
)

// Options configure a Server. Tokens is required.
type Options struct {
	Tokens *auth.Tokens
	Guard  *auth.Guard // nil: loopback names only
	Logger *slog.Logger
	// Limiter counts failed logins per address on every surface and
	// slows down the failures past its budget; nil means 20 failures a
	// minute.
	Limiter *auth.Limiter
	// Pending caps the WebSocket connections (/ws, /agent/ws together)
	// that have not logged in yet and the Connect calls whose token is
	// not known yet; nil means 256, 64 per address.
	Pending *auth.Pending
	// Idle bounds the HTTP connections not in a handler (reading
	// headers, idle between requests); /health reports it. Give the same
	// one to NewHTTPServer. nil means 1024, 256 per address.
	Idle *IdleConns
	// MaxUnauthMessage bounds what a client sends before its token is
	// checked: a /ws frame before UserLogin, an /agent/ws frame before
	// relay.join, a Connect message without a valid header token (default
	// 64 KiB). Inbox.MaxLoginFrame, Relay.MaxJoinFrame and
	// RPC.MaxUnauthMessage, when set, win.
	MaxUnauthMessage int
	// BodyTimeout is how long a request body may take to arrive, from the
	// end of its headers (default 30s); a body still arriving then is cut
	// off, as ReadHeaderTimeout cuts off slow headers.
	BodyTimeout time.Duration
	// Inbox tunes /ws; its Hub, Tokens, Guard, Limiter, Pending and
	// Logger are filled in.
	Inbox inbox.Options
	// RPC tunes the Connect services; Hub, Relay, Tokens, Guard, Limiter
	// and Logger are filled in.
	RPC rpc.Options
	// Relay tunes /agent/ws; Tokens, Guard, Limiter, Pending, Logger and
	// Logs are filled in.
	Relay relay.Options
	// AGUI tunes POST /agui (MaxBody); Relay, Guard and Logger are
	// filled in.
	AGUI agui.Options
	// Ingress tunes /ingress/ws; Tokens, Guard, Limiter, Pending, Hub and
	// Logger are filled in, and the built-in orchestrator when
	// Orchestrator is nil.
	Ingress ingress.Options
	// StudyLogs is where relay sessions are logged; nil refuses
	// session.start.
	StudyLogs *studylog.Dir
	// Catalog is the booking host's catalog JSON; nil serves the default.
	Catalog []byte
	// Hub tunes the requests (Store, OrphanGrace, Retention, PresenceDelay);
	// its Logger is filled in.
	Hub hub.Options
	// MCP tunes /mcp (MaxSessions, the bridges' Bridge options); the rest
	// is filled in.
	MCP mcphttp.Options
	// Cluster, in cluster mode, is this instance's link to the others;
	// /health reports it. nil: one process.
	Cluster *cluster.Cluster
	// Push, when set, sends Web Push to the devices that turned it on
	// (/push/...); its Hub and Logger are filled in. nil: no push.
	Push *push.Options
	// Caps answer one question each from a notification or a channel
	// (nil: this process's own; a cluster shares them,
	// answercap.NewShared).
	Caps *answercap.Store
	// Channels, when set, takes the events of the tokens it routes to
	// ntfy, webhooks...; its Hub, Caps and Logger are filled in.
	Channels *channel.Options
}

// Guard kinds of a route: how it checks the token.
const (
	GuardHeader  = "header"  // X-Agentassistant-Token / Authorization / ?token=
	GuardConnect = "connect" // the Connect interceptor (UserToken or header)
	GuardLogin   = "login"   // /ws: UserLogin's StrParam
	GuardJoin    = "join"    // /agent/ws: relay.join's payload.token
	GuardHello   = "hello"   // /ingress/ws: hello's api_key
	GuardPublic  = "public"  // static UI files, which hold no data
	// GuardCapability: no token; a single-use capability of one question
	// (a push notification's answer), refused 410 when unknown.
	GuardCapability = "capability"
	// GuardSigned: no token; an HMAC signature with a webhook's secret
	// over a fresh timestamp and the body, each once; else 401.
	GuardSigned = "signed"
	// GuardStatus: without a token, the status alone (a balancer's
	// check); a wrong token refused as GuardHeader; with the token, all.
	GuardStatus = "status"
)

// Route is one registered pattern and how it is guarded.
type Route struct {
	Pattern string
	Guard   string
}

// Server is the composed handler and the state behind it.
type Server struct {
	hub     *hub.Hub
	inbox   *inbox.Handler
	relay   *relay.Relay
	mcp     *mcphttp.Handler
	guard   *auth.Guard
	agui    *agui.Handler
	ingress *ingress.Handler
	builtin *ingress.Builtin // nil with an external orchestrator
	handler http.Handler
	tokens  *auth.Tokens
	limiter *auth.Limiter
	routes  []Route
	allow   map[string][]string // a path's methods, by path: written by New only
	mux     *http.ServeMux
	started time.Time
	bodyBy  time.Duration
	cluster *cluster.Cluster
	idle    *IdleConns
	metrics *metrics.Metrics
	push    *push.Pusher // nil without push
	// caps answer one question each from a notification or a channel.
	caps     *answercap.Store
	stopCaps func()
	channels *channel.Manager // nil without channels
	hooked   map[string]bool  // the webhooks' answer routes: written by New only
}

// MaxBody bounds any request body (Connect messages carry images).
const MaxBody = 17 << 20

// New builds the server.
func New(o Options) *Server {
	opt.Logger(&o.Logger)
	if o.Limiter == nil {
		o.Limiter = auth.NewLimiter(0, 0)
	}
	if o.Pending == nil {
		o.Pending = auth.NewPending(0, 0)
	}
	opt.Default(&o.MaxUnauthMessage, 64<<10)
	if o.Idle == nil {
		o.Idle = NewIdleConns(0, 0)
	}
	opt.Default(&o.BodyTimeout, 30*time.Second)
	s := &Server{tokens: o.Tokens, limiter: o.Limiter, guard: o.Guard, started: time.Now(), mux: http.NewServeMux(), bodyBy: o.BodyTimeout, cluster: o.Cluster, idle: o.Idle}
	ho := o.Hub
	ho.Logger = o.Logger.With("component", "hub")
	// The questions' deadlines are on the hub's clock (in a cluster,
	// NATS's): so are their buttons' ends, checked on it too.
	opt.Clock(&ho.Now)
	s.hub = hub.New(ho)

	io := o.Inbox
	io.Hub, io.Tokens, io.Guard, io.Limiter, io.Logger = s.hub, o.Tokens, o.Guard, o.Limiter, o.Logger.With("component", "ws")
	io.Pending = o.Pending
	opt.Default(&io.MaxLoginFrame, int64(o.MaxUnauthMessage))
	s.inbox = inbox.New(io)

	rlo := o.Relay
	rlo.Tokens, rlo.Guard, rlo.Limiter, rlo.Logger, rlo.Logs = o.Tokens, o.Guard, o.Limiter, o.Logger.With("component", "relay"), o.StudyLogs
	rlo.Pending = o.Pending
	opt.Default(&rlo.MaxJoinFrame, int64(o.MaxUnauthMessage))
	s.relay = relay.New(rlo)

	ro := o.RPC
	ro.Hub, ro.Relay, ro.Tokens, ro.Guard, ro.Limiter, ro.Logger = s.hub, s.relay, o.Tokens, o.Guard, o.Limiter, o.Logger.With("component", "rpc")
	ro.Pending = o.Pending
	opt.Default(&ro.MaxUnauthMessage, o.MaxUnauthMessage)
	services := rpc.New(ro)
	for _, path := range services.Mount(s.mux) {
		s.routes = append(s.routes, Route{Pattern: path, Guard: GuardConnect})
	}

	cat := o.Catalog
	if cat == nil {
		cat, _ = catalog.Load("")
	}
	s.handle("/ws", GuardLogin, s.upgradeToken(s.inbox))
	s.handle("/agent/ws", GuardJoin, s.upgradeToken(s.relay))
	s.handle("GET /health", GuardStatus, s.checkOrigin(http.HandlerFunc(s.health)))
	s.handle("GET /api/catalog", GuardHeader, s.requireToken(catalog.Handler(cat)))
	s.handle("GET /internal/sessions/{id}/status", GuardHeader, s.requireToken(http.HandlerFunc(s.sessionStatus)))
	s.handle("POST /internal/send", GuardHeader, s.checkOrigin(s.requireToken(http.HandlerFunc(s.send))))
	// MCP over Streamable HTTP: agentassistant-mcp's tools, calling the
	// services above in process for the token this route checked.
	mo := o.MCP
	mo.Backend = func(token string) mcpbridge.Backend { return services.Local("mcp", token) }
	mo.TokenOf, mo.Logger = s.tokenOf, o.Logger.With("component", "mcp")
	if o.Cluster != nil && mo.SessionKey != nil {
		// A session any instance serves is cancelled and ended on all.
		mo.Peers = o.Cluster.MCP()
	}
	s.mcp = mcphttp.New(mo)
	s.handle("/mcp", GuardHeader, s.checkOrigin(s.requireToken(s.mcp)))
	ao := o.AGUI
	ao.Relay, ao.Guard, ao.Logger = s.relay, o.Guard, o.Logger.With("component", "agui")
	s.agui = agui.New(ao)
	s.handle("/agui", GuardHeader, s.requireToken(s.agui)) // POST; any other method 405, not the web UI
	// Ingress (seed 003): its runs are the external orchestrator's, or
	// the token's MCP agent's through the relay.
	igo := o.Ingress
	igo.Tokens, igo.Guard, igo.Limiter, igo.Pending, igo.Hub = o.Tokens, o.Guard, o.Limiter, o.Pending, s.hub
	igo.Logger = o.Logger.With("component", "ingress")
	opt.Default(&igo.MaxHelloFrame, int64(o.MaxUnauthMessage))
	if igo.Orchestrator == nil {
		s.builtin = ingress.NewBuiltin(ingress.BuiltinOptions{Relay: s.relay, Logger: igo.Logger, AgentWait: igo.AgentWait})
		igo.Orchestrator = s.builtin
	}
	s.ingress = ingress.New(igo)
	s.handle("/ingress/ws", GuardHello, s.upgradeToken(s.ingress))
	s.caps = o.Caps
	if s.caps == nil {
		s.caps = answercap.New()
	}
	s.stopCaps = s.caps.Follow(s.hub, store.Room)
	if o.Push != nil {
		po := *o.Push
		po.Hub, po.Logger, po.Caps = s.hub, o.Logger.With("component", "push"), s.caps
		s.push = push.New(po)
		withToken := func(h func(string) http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(s.tokenOf(r)).ServeHTTP(w, r) })
		}
		s.handle("GET /push/key", GuardHeader, s.requireToken(http.HandlerFunc(s.push.Key)))
		s.handle("POST /push/subscriptions", GuardHeader, s.checkOrigin(s.requireToken(withToken(s.push.Subscribe))))
		s.handle("DELETE /push/subscriptions/{id}", GuardHeader, s.checkOrigin(s.requireToken(withToken(s.push.Unsubscribe))))
		s.handle("PUT /push/subscriptions/{id}", GuardHeader, s.checkOrigin(s.requireToken(withToken(s.push.Renew))))
	}
	if o.Channels != nil {
		co := *o.Channels
		co.Hub, co.Caps, co.Logger = s.hub, s.caps, o.Logger.With("component", "channels")
		s.channels = channel.New(co)
		for _, chs := range co.Routes {
			for _, c := range chs {
				if w, ok := c.(*channel.Webhook); ok && !s.hooked[w.ID] {
					if s.hooked == nil {
						s.hooked = map[string]bool{}
					}
					s.hooked[w.ID] = true
					s.handle("POST /channels/webhook/"+w.ID+"/answer", GuardSigned, w.Answers(s.hub))
				}
			}
		}
	}
	// A notification's or a channel's button answers one question with a
	// capability (srv/answercap), never the token.
	s.handle("POST /push/answer", GuardCapability, s.checkOrigin(s.caps.Answer(s.hub, ho.Now, o.Logger.With("component", "answer"), s.failedLogin)))
	metricsOpts := metrics.Options{Hub: s.hub, Connections: s.doorCounts(), PreAuth: o.Pending.Turned, NATS: s.natsState()}
	if s.channels != nil {
		metricsOpts.ChannelsRefused = s.channels.Refused
		for name := range s.channels.Refused() {
			metricsOpts.Channels = append(metricsOpts.Channels, name)
		}
	}
	s.metrics = metrics.New(metricsOpts)
	s.handle("GET /metrics", GuardHeader, s.requireToken(s.metrics.Handler()))
	s.handle("/", GuardPublic, webui.Handler())
	s.handler = o.Guard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			// On a copy of the request: net/http looks at the body of
			// its own to tell whether the request was read to its end,
			// and closes the connection after the answer when it was
			// not. Replaced in place, it saw a MaxBytesReader, took a
			// body cut off at the deadline for one read whole, and read
			// the rest of it as the next request.
			r = r.WithContext(r.Context())
			r.Body = http.MaxBytesReader(w, bodyDeadline(w, r.Body, s.bodyBy), MaxBody)
		}
		// On every answer, not only the web UI's pages: an error that
		// quotes what was sent is never taken for a page, and nothing
		// followed from here says where it came from.
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		s.route(w, r)
	}))
	return s
}

func (s *Server) handle(pattern, guard string, h http.Handler) {
	s.routes = append(s.routes, Route{Pattern: pattern, Guard: guard})
	switch guard {
	case GuardPublic:
		h = public(h)
	case GuardCapability, GuardSigned:
		// Who sends it is known from its body only.
		h = bodyWaits(h)
	}
	if guard != GuardConnect { // Connect inflates its own, to its limit
		h = identityOnly(h)
	}
	s.mux.Handle(pattern, h)
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		return
	}
	// The same path with another method: 405, not the web UI's 404.
	if method == http.MethodGet {
		method = "GET, HEAD"
	}
	if s.allow == nil {
		s.allow = make(map[string][]string)
	}
	if s.allow[path] == nil {
		s.mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Allow", strings.Join(s.allow[path], ", "))
			refuseUnread(w, "method not allowed", http.StatusMethodNotAllowed)
		})
	}
	s.allow[path] = append(s.allow[path], method)
}

// Handler is everything the server serves.
func (s *Server) Handler() http.Handler { return s.handler }

// Relay is the relay sessions (/agent/ws, the UI tools' Connect calls),
// for the cluster's link.
func (s *Server) Relay() *relay.Relay { return s.relay }

// Idle is the bound on connections not in a handler, for NewHTTPServer.
func (s *Server) Idle() *IdleConns { return s.idle }

// Hub exposes the token rooms, for tests and embedding.
func (s *Server) Hub() *hub.Hub { return s.hub }

// Restored tells the channels that the hub's requests were restored
// (Hub.Restore): their answers held until then (channel.Options
// AfterRestore) are taken, and a question saved before the server
// stopped and not yet sent to one of its channels is sent now; the
// questions of tokens still waiting are pushed again (Pusher.Resend).
func (s *Server) Restored(tokens []string) {
	if s.channels != nil {
		s.channels.Restored()
	}
	if s.push != nil {
		s.push.Resend(tokens)
	}
}

// Inbox is the /ws endpoint.
func (s *Server) Inbox() *inbox.Handler { return s.inbox }

// StorageLost says what the channels lost with the cluster's storage
// (channel.Manager.StorageLost), before the instance starts afresh.
func (s *Server) StorageLost() {
	if s.channels != nil {
		s.channels.StorageLost()
	}
}

// Close ends the waiting agent calls (Unavailable) and every WebSocket
// connection, and waits for them. Idempotent.
func (s *Server) Close() error {
	s.mcp.Close() // first: its calls end while the hub still answers
	s.ingress.Close()
	if s.builtin != nil {
		s.builtin.Close()
	}
	s.hub.Close()
	s.metrics.Close()
	s.stopCaps()
	if s.channels != nil {
		s.channels.Close()
	}
	if s.push != nil {
		s.push.Close()
	}
	s.agui.Close()
	_ = s.relay.Close()
	return s.inbox.Close()
}

// requireToken guards a plain HTTP endpoint: the token in the
// X-Agentassistant-Token or Authorization header, or in ?token= (one).
func (s *Server) requireToken(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := s.tokens.Presented(r); err != nil {
			s.failedLogin(r)
			msg := err.Error()
			if errors.Is(err, auth.ErrInvalidToken) {
				// An MCP client shows this to a person setting it up:
				// say which token, and how to send it.
				msg += ": send the token of the URL agentassistant-srv printed at start (its ?token=) as the header Authorization: Bearer TOKEN"
			}
			tok, perr := auth.RequestToken(r)
			refuseToken(w, msg, tok != "" || perr != nil)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// upgradeToken checks the token a WebSocket upgrade presents before its
// first frame (auth.UpgradeToken), before the connection may take a place
// among those waiting to log in: a valid one waits among its token's own,
// where no flood of strangers evicts it (auth.Pending.AcquireUpgrade). A
// wrong one, or two different ones, counts as the failed login it is (a
// guess here costs what one in a frame does), and the connection then
// waits as a stranger and logs in with its first frame, as one without a
// token does: a page whose stored token is stale hears so in its login's
// answer. Either way the first frame's token decides the room.
func (s *Server) upgradeToken(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, err := auth.UpgradeToken(r)
		switch {
		case err == nil && tok == "":
		case err == nil && s.tokens.Valid(tok):
			r = r.WithContext(auth.WithUpgradeToken(r.Context(), tok))
		default:
			s.failedLogin(r)
			if r.Context().Err() != nil {
				return // closed meanwhile
			}
		}
		h.ServeHTTP(w, r)
	})
}

// failedLogin counts r's failed login, and past the Limiter's budget
// waits, on a connection that counts as idle meanwhile.
func (s *Server) failedLogin(r *http.Request) {
	waitingWhile(r.Context(), func(done <-chan struct{}) { s.limiter.Fail(done, r.RemoteAddr) })
}

// checkOrigin refuses a browser request from another site (403), as the
// MCP specification requires of Streamable HTTP servers against DNS
// rebinding and cross-site requests: a page may send a request to
// 127.0.0.1 without reading its answer, and a tool call or a push acts.
// Clients that send no Origin (MCP clients, agents, curl) pass.
func (s *Server) checkOrigin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.guard.OriginAllowed(r) {
			refuseUnread(w, "forbidden origin", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// refuseUnread answers a request that is refused before its body is read,
// and closes the connection after the answer: otherwise net/http would
// read up to 256 KiB of the body first, for as long as the body timeout,
// before the client got its answer.
// identityOnly refuses, unread, a request whose body comes with a
// Content-Encoding: h reads its body as it is, and would refuse gzip as
// what it is not (not JSON at byte 1). 415 with Accept-Encoding: identity
// says what to send instead (RFC 9110 15.5.16, RFC 7694). Before the
// token: it tells nothing of it and costs nothing.
func identityOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, v := range r.Header.Values("Content-Encoding") {
			for c := range strings.SplitSeq(v, ",") {
				if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
					w.Header().Set("Accept-Encoding", "identity")
					refuseUnread(w, "Content-Encoding "+strconv.Quote(c)+" is not taken here: send the body as it is", http.StatusUnsupportedMediaType)
					return
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// refuseToken answers 401 to a request without a valid token, naming the
// scheme as HTTP asks (RFC 9110 15.5.2; RFC 6750 3: invalid_token when
// one was presented). There is no OAuth here: no resource_metadata.
func refuseToken(w http.ResponseWriter, msg string, presented bool) {
	challenge := `Bearer realm="agentassistant"`
	if presented {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	refuseUnread(w, msg, http.StatusUnauthorized)
}

func refuseUnread(w http.ResponseWriter, msg string, code int) {
	w.Header().Set("Connection", "close")
	http.Error(w, msg, code)
}

// Connections counts the WebSocket connections of this instance (/ws,
// /agent/ws and /ingress/ws).
func (s *Server) Connections() int { return s.inbox.Count() + s.relay.Count() + s.ingress.Count() }

// doorCounts are the open connections of each door, read by /metrics.
func (s *Server) doorCounts() map[string]func() int {
	return map[string]func() int{"ws": s.inbox.Count, "agent_ws": s.relay.Count, "ingress": s.ingress.Count}
}

// natsState is the cluster's link to NATS for /metrics; nil in one
// process.
func (s *Server) natsState() func() bool {
	if s.cluster == nil {
		return nil
	}
	return func() bool { return s.cluster.Status().Healthy }
}

// health answers a balancer's check (seed 003: `curl -f /health`): 200
// healthy, or 503 unhealthy while this instance can save nothing (its
// cluster's NATS is away, its store refuses writes). Without a token that is all it says: no
// counts, no version, nothing about the server to someone who may not
// have it. A wrong token is refused and counted as anywhere else; with
// the token come seed 003's connections and uptime_seconds and the
// detail for operators and benchmarks.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	status, code, reason := "healthy", http.StatusOK, ""
	var c any
	mode := "single"
	if s.cluster != nil {
		st := s.cluster.Status()
		mode, c = "cluster", st
		if !st.Healthy {
			// Nothing can be saved here until NATS answers again: a
			// balancer should send no one.
			status, code, reason = "unhealthy", http.StatusServiceUnavailable, "nats: "+st.Problem
		}
	}
	if reason == "" && s.hub.Refusing() {
		// A full disk, or NATS out of storage: nothing is saved here
		// until a write passes (the hub's probe tries every second).
		status, code, reason = "unhealthy", http.StatusServiceUnavailable, "the store refuses writes (is the disk full, or NATS out of storage?)"
	}
	tok, err := auth.RequestToken(r)
	if err == nil && tok != "" && !s.tokens.Valid(tok) {
		err = auth.ErrInvalidToken
	}
	if err != nil {
		s.failedLogin(r)
		refuseToken(w, err.Error(), true)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if tok == "" {
		writeJSON(w, code, map[string]string{"status": status})
		return
	}
	uptime := int64(time.Since(s.started).Seconds())
	out := map[string]any{
		// seed 003's
		"status":         status,
		"connections":    s.Connections(),
		"uptime_seconds": uptime,
		// the detail
		"mode":               mode,
		"cluster":            c,
		"uptimeSeconds":      uptime,
		"wsConnections":      s.inbox.Count(),
		"relayConnections":   s.relay.Count(),
		"relaySessions":      s.relay.Sessions(),
		"mcpSessions":        s.mcp.Sessions(),
		"wsStates":           s.inbox.States(),
		"relayStates":        s.relay.States(),
		"ingressConnections": s.ingress.Count(),
		"ingressStates":      s.ingress.States(),
		"ingressSessions":    s.ingress.Sessions(),
		"ingressReplayBytes": s.ingress.ReplayBytes(),
		"idleConnections":    s.idle.Stats(),
		"goroutines":         runtime.NumGoroutine(),
	}
	if s.channels != nil {
		// A credential refused is a setting to fix, not a reason to send
		// no one here: the status stays as it is.
		out["channels"] = s.channels.States()
	}
	if reason != "" {
		out["reason"] = reason
	}
	writeJSON(w, code, out)
}

// MaxHTTP2Streams is how many requests one HTTP/2 connection (TLS) may
// have in the server at once; net/http would take 250. The bound on
// waiting connections (IdleConns) counts connections, and one waiting
// for nobody may hold this many streams that wait too (a body that never
// comes, a UI file never read), each a goroutine and its buffers: 16
// makes 256 such connections from one address some 4,000 handlers
// rather than 64,000. A client that needs more opens another connection
// (Go's does by itself; a browser queues them).
const MaxHTTP2Streams = 16

// HTTPOptions are the timeouts of the http.Server; zero values take the
// defaults.
type HTTPOptions struct {
	ReadHeaderTimeout time.Duration // default 10s: slow headers (slowloris) are cut off
	IdleTimeout       time.Duration // default 120s
	ErrorLog          *slog.Logger
	// Idle bounds the connections not in a handler (Server.Idle); nil:
	// a bound of its own with the defaults.
	Idle *IdleConns
}

// NewHTTPServer returns the http.Server for h with the server's limits.
// No ReadTimeout or WriteTimeout: agent calls wait for a person for many
// minutes and WebSockets live for hours; their own deadlines apply.
func NewHTTPServer(h http.Handler, o HTTPOptions) *http.Server {
	opt.Default(&o.ReadHeaderTimeout, 10*time.Second)
	opt.Default(&o.IdleTimeout, 120*time.Second)
	if o.Idle == nil {
		o.Idle = NewIdleConns(0, 0)
	}
	hs := &http.Server{
		Handler:           o.Idle.Wrap(h),
		ConnContext:       o.Idle.ConnContext,
		ConnState:         o.Idle.ConnState,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: MaxHTTP2Streams},
	}
	if o.ErrorLog != nil {
		hs.ErrorLog = slog.NewLogLogger(o.ErrorLog.Handler(), slog.LevelDebug)
	}
	return hs
}
