// Package wire is the vocabulary both sides of agentassistant speak: the
// request kinds, identifiers and int32 fields of the protobuf messages, the
// Cmd names of /ws, and the message types and error codes of the mvp-0.2
// relay on /agent/ws, with the shape of a host's toolSchema entry.
//
// It is a leaf: it imports nothing of this module but gen/, so a client
// (agentassistant-mcp, agentassistant-input) can use it without pulling in
// the server or its storage.
package wire

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"time"
)

// Kind tells the two request kinds apart.
type Kind int

const (
	// AskQuestion is a question, answered by the person (ask_question).
	AskQuestion Kind = iota + 1
	// TaskFinish is a task report, answered with feedback or the next
	// instruction (task_finish, work_report).
	TaskFinish
)

// String is the kind's name on the wire ("AskQuestion", "TaskFinish"): the
// MessageType of pending messages, cancellations and history items.
func (k Kind) String() string {
	switch k {
	case AskQuestion:
		return CmdAskQuestion
	case TaskFinish:
		return CmdTaskFinish
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// NewID returns a random 96-bit hex identifier for requests and clients.
func NewID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Seconds is d in whole seconds for the wire's int32 fields, saturating.
func Seconds(d time.Duration) int32 {
	return Count(int(d / time.Second))
}

// Count is n for the wire's int32 fields, saturating.
func Count(n int) int32 {
	return int32(min(max(n, 0), math.MaxInt32)) // #nosec G115 -- clamped to int32's range
}
