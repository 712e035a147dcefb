package hub

import (
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/srv/store"
)

// What a room's clients are told: notes, not frames. The hub says what
// happened; the door a client came in by (srv/inbox for /ws) encodes it
// in its own wire, and keeps the older clients' ways.

// NoteKind says what a Note tells.
type NoteKind uint8

// The kinds of Note, and the fields each fills.
const (
	// NoteAsked: a request is shown (Token, Request, AskedAt; Gone in a
	// pending list).
	NoteAsked NoteKind = iota + 1
	// NoteAnswered: a person's answer to a request was taken (Token,
	// Request, AskedAt, Reply).
	NoteAnswered
	// NoteClosed: a request was withdrawn or timed out, or is no longer
	// pending for a reason forgotten (Token, Request, Reason). Request has
	// only its ID, and Kind 0, when even its kind is forgotten.
	NoteClosed
	// NoteAgent: a pending request's agent left, or came back (Request,
	// Gone).
	NoteAgent
	// NotePresence: a device joined, left or was renamed (User, Status,
	// At).
	NotePresence
	// NoteOnline: who is online, earliest first (Users), in place of many
	// presence changes at once.
	NoteOnline
	// NoteCrowd: presence changed in a room too big to tell who (At).
	NoteCrowd
	// NoteLine: a chat line or a remote-input backspace for one device
	// (Line).
	NoteLine
	// NoteLost: the requests a damaged store could not restore (Lost,
	// the newest maxLostShown; empty once dismissed).
	NoteLost
)

// Note is one thing a room's clients are told. It is not changed once
// made: a broadcast hands the same Note to every client, and the replay
// ring keeps it for clients that come back.
type Note struct {
	Kind NoteKind
	// Seq is the room's number of the event the note belongs to (a
	// replayed note keeps it); 0 for notes that are not replayed.
	Seq uint64
	// Token names the room; a request's wire forms carry it.
	Token   string
	Request Request
	AskedAt time.Time
	Reply   *Reply
	// Reason is why a request was closed ("timeout", "cancelled",
	// ReasonAbandoned, ReasonNoLongerPending, ...).
	Reason string
	// Gone: no agent waits for the request.
	Gone   bool
	User   User
	Status string // wire.StatusConnected or wire.StatusDisconnected
	At     time.Time
	Users  []User
	Line   *Line
	Lost   []store.Lost

	once    sync.Once
	encoded [][]byte
}

// Encoded returns encode(n), called once for the note however many
// clients it goes to: a broadcast to a thousand devices encodes it once.
// A note is encoded by one door only (each door's notes are its own).
func (n *Note) Encoded(encode func(*Note) [][]byte) [][]byte {
	n.once.Do(func() { n.encoded = encode(n) })
	return n.encoded
}

// User is a device as the others see it.
type User struct {
	ID          string    `json:"id"`
	Nickname    string    `json:"nickname,omitempty"`
	ConnectedAt time.Time `json:"connectedAt,omitzero"`
}

func userOf(c Client) User {
	return User{ID: c.ID(), Nickname: c.Nickname(), ConnectedAt: c.ConnectedAt()}
}

// Line is a chat line, or a remote-input backspace, from one device of a
// room to another; between instances it travels as it is (Peers).
type Line struct {
	// Backspace: remote input's backspace; else a chat line.
	Backspace bool      `json:"backspace,omitempty"`
	ID        string    `json:"id,omitempty"` // the chat line's
	From      User      `json:"from"`
	To        User      `json:"to"` // its nickname only for a chat line
	Content   string    `json:"content,omitempty"`
	SentAt    time.Time `json:"sentAt,omitzero"`
}

// requestNote is the note that shows p.
func requestNote(kind NoteKind, p *pending) *Note {
	return &Note{Kind: kind, Token: p.token, Request: p.req, AskedAt: p.createdAt}
}
