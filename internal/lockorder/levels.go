package lockorder

// The lock order of agentassistant-srv, first taken first. A goroutine
// holding one of these may take only those below it. Two locks of one
// level are never held together (two rooms, two relay sessions).
//
//	 5 ingress.Builtin.mu  the built-in orchestrator's hosts and runs; a
//	                       host joins its relay session under it
//	10 relay.Relay.mu      the relay sessions by name (sessions.go)
//	20 relay.channel.mu    one relay session
//	25 ingress.bhost.mu    one built-in host, taken under channel.mu
//	                       (Deliver queues) and under Builtin.mu
//	26 hub.localRecords.applying
//	                       an apply lock of a server that runs alone: a
//	                       change of its rooms is numbered and applied
//	                       under it
//	27 hub.localRecords.mu the records of a server that runs alone; taken
//	                       under an apply lock, store.Store.mu under it;
//	                       also by the store's writer while it commits
//	                       (Store.Protect), so nothing waits for a commit
//	                       under it
//	30 hub.Hub.mu          the rooms by token; held alone
//	40 hub.room.mu         one room; its timers take it too
//	45 hub.Hub.wmu         the hub's cluster-mode writes, started under
//	                       room.mu; nothing is taken under it
//	50 studylog.Dir.mu     study log names, taken under channel.mu
//	60 store.Store.mu      the write queue, taken under the hub's local
//	                       records' lock (Stage)
//	70 ingress.Handler.mu  the Ingress sessions
//	71 ingress.session.mu  one Ingress session: its devices, runs, calls;
//	                       nothing above is taken under the Ingress
//	                       handler's locks, so it calls the hub, the
//	                       relay and the orchestrator with none
//	90 auth.Pending.mu     connections not yet logged in; held alone
//	91 auth.Limiter.mu     failed logins by address; held alone
//	92 srv.IdleConns.mu    HTTP connections not in a handler; held alone
//
// Below all of these, not checked (their package keeps its own order):
// the lock of an owned.Group, a leaf taken under any of them (bhost.mu,
// session.mu) to start a goroutine, with nothing taken under it;
// the wsconn locks, taken under room.mu, channel.mu and ingress.session.mu
// when a frame is queued (Set.mu, then Conn.mu or Conn.rmu, then the
// poller's). Nothing above is taken under a wsconn lock: wsconn calls its
// readers with none held.
type (
	BuiltinHosts    struct{}
	RelaySessions   struct{}
	RelaySession    struct{}
	BuiltinHost     struct{}
	LocalApply      struct{}
	LocalRecords    struct{}
	Rooms           struct{}
	Room            struct{}
	HubWrites       struct{}
	StudyLogs       struct{}
	Store           struct{}
	IngressSessions struct{}
	IngressSession  struct{}
	Pending         struct{}
	Limiter         struct{}
	IdleConns       struct{}
)

func (BuiltinHosts) Order() (int, string)    { return 5, "ingress.Builtin.mu" }
func (RelaySessions) Order() (int, string)   { return 10, "relay.Relay.mu" }
func (RelaySession) Order() (int, string)    { return 20, "relay.channel.mu" }
func (BuiltinHost) Order() (int, string)     { return 25, "ingress.bhost.mu" }
func (LocalApply) Order() (int, string)      { return 26, "hub.localRecords.applying" }
func (LocalRecords) Order() (int, string)    { return 27, "hub.localRecords.mu" }
func (Rooms) Order() (int, string)           { return 30, "hub.Hub.mu" }
func (Room) Order() (int, string)            { return 40, "hub.room.mu" }
func (HubWrites) Order() (int, string)       { return 45, "hub.Hub.wmu" }
func (StudyLogs) Order() (int, string)       { return 50, "studylog.Dir.mu" }
func (Store) Order() (int, string)           { return 60, "store.Store.mu" }
func (IngressSessions) Order() (int, string) { return 70, "ingress.Handler.mu" }
func (IngressSession) Order() (int, string)  { return 71, "ingress.session.mu" }
func (Pending) Order() (int, string)         { return 90, "auth.Pending.mu" }
func (Limiter) Order() (int, string)         { return 91, "auth.Limiter.mu" }
func (IdleConns) Order() (int, string)       { return 92, "srv.IdleConns.mu" }
