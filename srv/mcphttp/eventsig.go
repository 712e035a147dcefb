package mcphttp

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// Event IDs another instance can resume. A call that asks the person (a
// question, a task report) has its request's ID chosen before it asks
// (mcpbridge.WithRequest), and once the bridge says what re-attaching to
// it takes, every event ID of the call's stream carries that, signed for
// the session and its room like the session ID (signed.go): the ID is
// "<log tag>-<number>.<claims>.<signature>". An instance whose log does
// not know the tag (the call runs elsewhere, or ran here before a
// restart) checks the signature and re-attaches to the request through
// the hub (Handler.serveResumed), so a client behind a balancer without
// affinity resumes a cut call wherever its next connection lands. A
// client cannot name another's request: the signature covers the
// session ID and the token's digest. Without a shared key (one
// instance) event IDs carry nothing but the tag and the number.

// eventIDLabel derives the key of event IDs from the cluster's shared
// key, apart from the key of session IDs.
const eventIDLabel = "agentassistant mcp event id v1"

// Bounds of what an event ID carries: a JSON-RPC id longer than maxCallID
// is not carried (its call is resumed only where it runs), and a
// signature is cut to macLen bytes.
const (
	maxCallID = 128
	macLen    = 16
)

// callClaims is what an event ID of a call's stream says of its request.
type callClaims struct {
	Request string          `json:"r"`
	Kind    wire.Kind       `json:"k"`
	Sum     []byte          `json:"d"`
	Timeout int64           `json:"t"` // seconds
	Call    json.RawMessage `json:"i"` // the call's JSON-RPC id
	// Run names the run of the instance where the call began
	// (Origins.Run), which relays its events to the instances that
	// resume it: one that is gone relays nothing more. Empty from an
	// instance of a release before it, or without Origins.
	Run string `json:"o,omitempty"`
}

func (c callClaims) sum() (s [sha256.Size]byte) {
	copy(s[:], c.Sum)
	return s
}

func (c callClaims) timeout() time.Duration { return time.Duration(c.Timeout) * time.Second }

var errBadEventSig = errors.New("not a signed event ID of this MCP session")

// eventSigner signs the claims of the calls of one session in one room.
type eventSigner struct {
	key        []byte
	token, sid string
}

// sign is the part of an event ID after its number: the claims and their
// signature, "" when the call's id is too long to carry.
func (e eventSigner) sign(c callClaims) string {
	if len(c.Call) > maxCallID {
		return ""
	}
	payload, _ := json.Marshal(c)
	return seal(e.key, sha256.Sum256([]byte(e.token)), macLen, payload, e.sid)
}

// verify reads the claims of sig, the signed part of an event ID, when
// they were signed for this session and room. Its cost is bounded by the
// event ID's (maxEventID): nothing is decoded before the signature holds.
func (e eventSigner) verify(sig string) (callClaims, error) {
	var c callClaims
	if err := unseal(e.key, sha256.Sum256([]byte(e.token)), macLen, sig, &c, errBadEventSig, e.sid); err != nil {
		if !errors.Is(err, errBadEventSig) {
			err = fmt.Errorf("read event ID: %w", err)
		}
		return c, err
	}
	if c.Request == "" || len(c.Sum) != sha256.Size || (c.Kind != wire.AskQuestion && c.Kind != wire.TaskFinish) || !validID(c.Call) {
		return c, errBadEventSig
	}
	return c, nil
}
