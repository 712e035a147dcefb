// Package hub keeps the token rooms: the /ws clients logged in under each
// token, the requests waiting for a person, and who answered what.
//
// The hub starts no goroutines. A request's waiting belongs to the caller of
// Ask (the RPC handler), a client's sending belongs to its connection.
package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
)

// Client is one logged-in /ws connection as the hub sees it.
type Client interface {
	ID() string
	Nickname() string
	ConnectedAt() time.Time
	// Send queues an encoded WebsocketMessage without blocking. A client
	// that cannot keep up is dropped by its connection, not waited for.
	Send(frame []byte) bool
}

// Kind tells the two request kinds apart.
type Kind int

const (
	AskQuestion Kind = iota + 1
	TaskFinish
)

// String is the kind's name on the wire ("AskQuestion", "TaskFinish").
func (k Kind) String() string {
	switch k {
	case AskQuestion:
		return "AskQuestion"
	case TaskFinish:
		return "TaskFinish"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Request is what an agent asks a person: a question or a task report.
type Request struct {
	Kind             Kind
	ID               string
	ProjectDirectory string
	// Text is the question or the summary, markdown.
	Text    string
	Timeout time.Duration
}

// Reply is a person's answer. AskQuestionResponse and TaskFinishResponse
// share this shape on the wire.
type Reply struct {
	IsError  bool
	Meta     map[string]string
	Contents []*pb.McpResultContent
	// Who answered.
	ClientID string
	Nickname string
}

// Errors Ask, Answer and Chat return; the RPC and /ws layers map them to
// their wire codes.
var (
	ErrTimeout    = errors.New("no reply before the timeout")
	ErrDuplicate  = errors.New("a request with this ID is already pending")
	ErrNotPending = errors.New("request is not pending: it was answered, cancelled or timed out")
	ErrNoReceiver = errors.New("receiver is not online under this token")
	ErrClosed     = errors.New("server is shutting down")
)

// Options configure a Hub. The zero value is usable.
type Options struct {
	Logger *slog.Logger // nil: discard
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// PresenceDelay gathers joins and leaves before they are announced
	// (default 50ms), so a crowd arriving or leaving at once costs O(N)
	// frames, not O(N²).
	PresenceDelay time.Duration
}

// Presence in a room: up to presenceBatch changes are announced one by one,
// more as one online-users list. A room of more than bigRoom clients (far
// beyond a person's devices) gets a bare "changed" notice instead, at most
// every bigRoomDelay: telling everyone about everyone is N² bytes however
// it is framed, so clients of big rooms ask for the list when they want it.
const (
	presenceBatch = 16
	bigRoom       = 64
	bigRoomDelay  = 250 * time.Millisecond
)

// StatusChanged is the status of the bare presence notice of big rooms.
const StatusChanged = "changed"

// Hub is safe for concurrent use.
type Hub struct {
	log *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	rooms map[string]*room

	quit      chan struct{} // closed by Close: every Ask returns ErrClosed
	closeOnce sync.Once
	delay     time.Duration
}

// New returns an empty hub.
func New(o Options) *Hub {
	h := &Hub{log: o.Logger, now: o.Now, rooms: make(map[string]*room), quit: make(chan struct{}), delay: o.PresenceDelay}
	if h.delay <= 0 {
		h.delay = 50 * time.Millisecond
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	return h
}

func (h *Hub) room(token string) *room {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rooms[token]
	if r == nil {
		r = &room{clients: make(map[string]Client), joined: make(map[string]uint64), pending: make(map[string]*pending), delay: h.delay}
		h.rooms[token] = r
	}
	return r
}

// pending is a request waiting for its outcome.
type pending struct {
	req       Request
	token     string
	createdAt time.Time
	frame     []byte // the encoded broadcast, reused for late joiners' lists
	done      chan struct{}
	reply     *Reply // set before done is closed
}

// Ask delivers req to every client of token and waits until one answers,
// the request times out (ErrTimeout), or ctx ends (ctx.Err()). On timeout
// or cancellation the request is withdrawn and every client is told.
func (h *Hub) Ask(ctx context.Context, token string, req Request) (*Reply, error) {
	select {
	case <-h.quit:
		return nil, ErrClosed
	default:
	}
	r := h.room(token)
	p := &pending{req: req, token: token, createdAt: h.now(), done: make(chan struct{})}
	p.frame = marshal(requestFrame(p))
	if err := r.add(p); err != nil {
		return nil, err
	}
	h.log.Debug("request pending", "kind", req.Kind, "id", req.ID, "timeout", req.Timeout)

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-p.done:
		return p.reply, nil
	case <-timeout:
		if r.withdraw(p, "timeout") {
			h.log.Info("request timed out", "kind", req.Kind, "id", req.ID)
			return nil, ErrTimeout
		}
	case <-h.quit:
		// Not withdrawn: the clients are told nothing, since the server
		// is going away, not the request.
		r.remove(p)
		return nil, ErrClosed
	case <-ctx.Done():
		if r.withdraw(p, "cancelled") {
			h.log.Info("request cancelled by the agent", "kind", req.Kind, "id", req.ID)
			return nil, ctx.Err()
		}
	}
	<-p.done // answered in the same instant it was withdrawn: the answer wins
	return p.reply, nil
}

// Close makes every waiting and future Ask return ErrClosed. Idempotent.
func (h *Hub) Close() {
	h.closeOnce.Do(func() { close(h.quit) })
}

// Answer records c's reply to the request id of the given kind. The first
// answer wins; the other clients of the room get a reply notification.
func (h *Hub) Answer(token string, kind Kind, id string, rep Reply) error {
	return h.room(token).answer(kind, id, rep)
}

// Join adds c to the room of token and tells the others it is online.
// welcome, when not nil, is queued to c first, atomically with joining: c
// gets it before any broadcast and misses none made after it.
func (h *Hub) Join(token string, c Client, welcome []byte) {
	h.room(token).join(c, welcome, h.now())
}

// Leave removes c from the room of token and tells the others.
func (h *Hub) Leave(token string, c Client) {
	h.room(token).leave(c, h.now())
}

// PendingMessages lists the requests of token still waiting, oldest first.
func (h *Hub) PendingMessages(token string) []*pb.PendingMessage {
	return h.room(token).pendingMessages()
}

// Validity reports, for each id, whether it is still pending under token.
func (h *Hub) Validity(token string, ids []string) map[string]bool {
	return h.room(token).validity(ids)
}

// Count reports the clients logged in under token.
func (h *Hub) Count(token string) int {
	r := h.room(token)
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.clients)
}

// OnlineUsers lists the clients of token, earliest first.
func (h *Hub) OnlineUsers(token string) []*pb.OnlineUser {
	return h.room(token).onlineUsers()
}

// Chat delivers a chat message from one client of token to another.
func (h *Hub) Chat(token string, from Client, to, content string) (*pb.ChatMessage, error) {
	return h.room(token).chat(from, to, content, h.now())
}

// room is everything under one token.
type room struct {
	mu      sync.Mutex
	clients map[string]Client
	joined  map[string]uint64 // client id -> join order
	joins   uint64
	// snapshot is clients as a slice for broadcasts; nil after a change
	// and rebuilt on the next broadcast.
	snapshot []Client
	pending  map[string]*pending

	// Presence changes waiting to be announced, in order; the timer that
	// announces them is armed while the list is not empty.
	delay    time.Duration
	presence []presenceChange
	flushing bool
}

type presenceChange struct {
	c      Client
	status string
	at     time.Time
}

func (r *room) add(p *pending) error {
	r.mu.Lock()
	if _, dup := r.pending[p.req.ID]; dup {
		r.mu.Unlock()
		return ErrDuplicate
	}
	r.pending[p.req.ID] = p
	cs := r.clientsLocked()
	r.mu.Unlock()
	broadcast(cs, p.frame, "")
	return nil
}

// withdraw removes p if it is still pending and tells every client why.
// It reports false when p was already answered.
func (r *room) withdraw(p *pending, reason string) bool {
	r.mu.Lock()
	if r.pending[p.req.ID] != p {
		r.mu.Unlock()
		return false
	}
	delete(r.pending, p.req.ID)
	close(p.done)
	cs := r.clientsLocked()
	r.mu.Unlock()
	broadcast(cs, marshal(cancelledFrame(p, reason)), "")
	return true
}

func (r *room) remove(p *pending) {
	r.mu.Lock()
	if r.pending[p.req.ID] == p {
		delete(r.pending, p.req.ID)
	}
	r.mu.Unlock()
}

func (r *room) answer(kind Kind, id string, rep Reply) error {
	r.mu.Lock()
	p := r.pending[id]
	if p == nil || p.req.Kind != kind {
		r.mu.Unlock()
		return ErrNotPending
	}
	delete(r.pending, id)
	p.reply = &rep
	close(p.done)
	cs := r.clientsLocked()
	r.mu.Unlock()
	broadcast(cs, marshal(replyNotificationFrame(p, &rep)), rep.ClientID)
	return nil
}

func (r *room) join(c Client, welcome []byte, now time.Time) {
	r.mu.Lock()
	if welcome != nil {
		c.Send(welcome)
	}
	r.clients[c.ID()] = c
	r.joins++
	r.joined[c.ID()] = r.joins
	r.snapshot = nil
	r.announceLocked(c, "online", now)
	r.mu.Unlock()
}

func (r *room) leave(c Client, now time.Time) {
	r.mu.Lock()
	if r.clients[c.ID()] != c {
		r.mu.Unlock()
		return
	}
	delete(r.clients, c.ID())
	delete(r.joined, c.ID())
	r.snapshot = nil
	r.announceLocked(c, "offline", now)
	r.mu.Unlock()
}

// announceLocked queues a presence change; the first one of a batch arms
// the flush.
func (r *room) announceLocked(c Client, status string, now time.Time) {
	r.presence = append(r.presence, presenceChange{c: c, status: status, at: now})
	if !r.flushing {
		r.flushing = true
		d := r.delay
		if len(r.clients) > bigRoom {
			d = max(d, bigRoomDelay)
		}
		time.AfterFunc(d, r.flushPresence)
	}
}

// flushPresence announces the gathered changes: each one to everyone but
// its subject when there are few, else the whole online list, encoded once,
// to everyone.
func (r *room) flushPresence() {
	r.mu.Lock()
	changes := r.presence
	r.presence = nil
	r.flushing = false
	cs := r.clientsLocked()
	r.mu.Unlock()
	if len(cs) == 0 || len(changes) == 0 {
		return
	}
	if len(cs) > bigRoom {
		broadcast(cs, marshal(&pb.WebsocketMessage{
			Cmd: CmdUserConnectionStatusNotification,
			UserConnectionStatusNotification: &pb.UserConnectionStatusNotification{
				Status: StatusChanged, Timestamp: changes[len(changes)-1].at.UnixMilli(),
			},
		}), "")
		return
	}
	if len(changes) <= presenceBatch {
		for _, ch := range changes {
			broadcast(cs, marshal(statusFrame(ch.c, ch.status, ch.at)), ch.c.ID())
		}
		return
	}
	us := r.onlineUsers()
	broadcast(cs, marshal(&pb.WebsocketMessage{
		Cmd:                    CmdGetOnlineUsers,
		GetOnlineUsersResponse: &pb.GetOnlineUsersResponse{OnlineUsers: us, TotalCount: Count(len(us))},
	}), "")
}

func (r *room) clientsLocked() []Client {
	if r.snapshot == nil {
		r.snapshot = make([]Client, 0, len(r.clients))
		for _, c := range r.clients {
			r.snapshot = append(r.snapshot, c)
		}
	}
	return r.snapshot
}

func (r *room) pendingMessages() []*pb.PendingMessage {
	r.mu.Lock()
	ps := make([]*pending, 0, len(r.pending))
	for _, p := range r.pending {
		ps = append(ps, p)
	}
	r.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool { return ps[i].createdAt.Before(ps[j].createdAt) })
	out := make([]*pb.PendingMessage, len(ps))
	for i, p := range ps {
		out[i] = pendingMessage(p)
	}
	return out
}

func (r *room) validity(ids []string) map[string]bool {
	out := make(map[string]bool, len(ids))
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		_, out[id] = r.pending[id]
	}
	return out
}

// onlineUsers lists the room's clients in the order they joined.
func (r *room) onlineUsers() []*pb.OnlineUser {
	r.mu.Lock()
	cs := append([]Client(nil), r.clientsLocked()...)
	order := make(map[string]uint64, len(cs))
	for _, c := range cs {
		order[c.ID()] = r.joined[c.ID()]
	}
	r.mu.Unlock()
	sort.Slice(cs, func(i, j int) bool { return order[cs[i].ID()] < order[cs[j].ID()] })
	out := make([]*pb.OnlineUser, len(cs))
	for i, c := range cs {
		out[i] = onlineUser(c)
	}
	return out
}

func (r *room) chat(from Client, to, content string, now time.Time) (*pb.ChatMessage, error) {
	r.mu.Lock()
	recv := r.clients[to]
	r.mu.Unlock()
	if recv == nil {
		return nil, ErrNoReceiver
	}
	msg := &pb.ChatMessage{
		MessageId:        newID(),
		SenderClientId:   from.ID(),
		SenderNickname:   from.Nickname(),
		ReceiverClientId: recv.ID(),
		ReceiverNickname: recv.Nickname(),
		Content:          content,
		SentAt:           now.UnixMilli(),
	}
	recv.Send(marshal(&pb.WebsocketMessage{
		Cmd:                     CmdChatMessageNotification,
		ChatMessageNotification: &pb.ChatMessageNotification{ChatMessage: msg},
	}))
	return msg, nil
}

// broadcast sends frame to every client but the one with id except.
func broadcast(cs []Client, frame []byte, except string) {
	for _, c := range cs {
		if c.ID() != except {
			c.Send(frame)
		}
	}
}
