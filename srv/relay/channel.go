package relay

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// Limits of one relay session: requests waiting for the host (route.go),
// user messages waiting for an agent (mailbox.go), agents (members.go).
const (
	maxInflight = 1024
	maxMailbox  = 256
	maxAgents   = 64
)

// channel is one relay session: everything under one (token, sessionId):
// its members (members.go), the requests in flight between them
// (route.go), the host's state and tools (state.go), the mailbox
// (mailbox.go) and the study session (study.go). It is freed when it
// holds nothing (sessions.go).
type channel struct {
	r     *Relay
	token string
	name  string
	key   string // in Relay.channels
	refs  int    // callers using it now; guarded by Relay.mu
	// use is its token's (limits.go); counted: an /agent/ws peer has
	// joined it, so it counts as one of the token's relay sessions
	// (guarded by Relay.mu); held: the bytes it counts in use.state
	// (guarded by mu).
	use     *tokenUse
	counted bool
	held    int64

	mu       lockorder.Mutex[lockorder.RelaySession]
	host     Peer
	agents   map[Peer]struct{}
	log      *studylog.Log // the active study session, nil when none
	inflight map[string]*call
	retired  map[string]struct{} // names of calls forgotten while their host may still answer: see track
	seq      uint64

	// The host's visible state as last published (backendData stripped).
	uiSpec, messageHistory, toolSchema json.RawMessage
	stateVersion                       uint64
	stateWake                          chan struct{} // closed on every state.updated
	tools                              []json.RawMessage
	toolIndex                          map[string]int

	mailbox     []Envelope // user.message for in-process agents
	waiters     int        // in-process agents waiting for one (external.go)
	mailboxWake chan struct{}
	activity    time.Time   // the last message through the relay session
	hostGone    *time.Timer // armed while the host is away: see leave
	hostLeft    uint64      // counts the host's departures; names hostGone's round

	// Cluster mode (cluster.go). On the home: the other instances' agents,
	// one peer each (also in agents), whether a host was ever here and its
	// id. Elsewhere: whether the home's host is online and its study
	// session.
	proxies       map[string]*remotePeer
	everHome      bool
	lastHost      string
	homeOnline    bool
	remoteSession string
}

func newChannel(r *Relay, token, name string) *channel {
	return &channel{
		r: r, token: token, name: name,
		agents:      make(map[Peer]struct{}),
		inflight:    make(map[string]*call),
		retired:     make(map[string]struct{}),
		proxies:     make(map[string]*remotePeer),
		toolIndex:   make(map[string]int),
		stateWake:   make(chan struct{}),
		mailboxWake: make(chan struct{}),
	}
}

// record appends an event to the active session's log. Called with mu
// held, before the event is forwarded, so what was relayed is on disk.
// It returns false when the log could not take the event (its token's
// study logs are at their bound, studylog.ErrFull): the study session has
// ended then (stopLogging), and the event is not in it; a caller whose
// event needs a study session does not send it on.
func (ch *channel) record(direction string, env Envelope) bool {
	if ch.log == nil {
		if direction == studylog.Internal {
			ch.forwardRecord(direction, env) // the home logs what happens here
		}
		return true
	}
	err := ch.log.Append(time.Now(), direction, env.Type, env.ID, env.ReplyTo, env.Payload)
	if errors.Is(err, studylog.ErrFull) {
		ch.stopLogging()
		return false
	}
	if err != nil {
		ch.r.log.Error("study log", "session", ch.log.ID(), "err", err)
	}
	return true
}

// fail answers env's sender with a protocol error.
func (ch *channel) fail(to Peer, replyTo string, e *Error) {
	env := Envelope{Type: wire.TypeError, ReplyTo: replyTo, Payload: mustJSON(e)}
	ch.record(studylog.Internal, env)
	to.deliver(env, nil)
}

func (ch *channel) String() string { return fmt.Sprintf("relay session %q", ch.name) }
