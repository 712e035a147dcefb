package lockorder

// The lock order of agentassistant-srv, first taken first. A goroutine
// holding one of these may take only those below it. Two locks of one
// level are never held together (two rooms, two relay sessions).
//
//	10 relay.Relay.mu      the relay sessions by name (sessions.go)
//	20 relay.channel.mu    one relay session
//	30 hub.Hub.mu          the rooms by token; held alone
//	40 hub.room.mu         one room; its timers take it too
//	50 studylog.Dir.mu     study log names, taken under channel.mu
//	60 store.Store.mu      the write queue, taken under room.mu (Put)
//	90 auth.Pending.mu     connections not yet logged in; held alone
//	91 auth.Limiter.mu     failed logins by address; held alone
//
// Below all of these, not checked (their package keeps its own order):
// the wsconn locks, taken under room.mu and channel.mu when a frame is
// queued (Set.mu, then Conn.mu or Conn.rmu, then the poller's). Nothing
// above is taken under a wsconn lock: wsconn calls its readers with none
// held.
type (
	RelaySessions struct{}
	RelaySession  struct{}
	Rooms         struct{}
	Room          struct{}
	StudyLogs     struct{}
	Store         struct{}
	Pending       struct{}
	Limiter       struct{}
)

func (RelaySessions) Order() (int, string) { return 10, "relay.Relay.mu" }
func (RelaySession) Order() (int, string)  { return 20, "relay.channel.mu" }
func (Rooms) Order() (int, string)         { return 30, "hub.Hub.mu" }
func (Room) Order() (int, string)          { return 40, "hub.room.mu" }
func (StudyLogs) Order() (int, string)     { return 50, "studylog.Dir.mu" }
func (Store) Order() (int, string)         { return 60, "store.Store.mu" }
func (Pending) Order() (int, string)       { return 90, "auth.Pending.mu" }
func (Limiter) Order() (int, string)       { return 91, "auth.Limiter.mu" }
