package hub

import (
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/srv/store"
)

// Restore loads what the store kept: pending requests come back pending
// (orphaned until their agent re-attaches, or withdrawn after OrphanGrace;
// expired ones as timed out), recent outcomes come back for re-attaching
// callers, answers no agent has taken yet come back for the next call of
// their project. tokens are the server's tokens: records of any other token are
// left alone. Call it before serving.
func (h *Hub) Restore(tokens []string) (pendingN, settledN int, err error) {
	if h.store == nil {
		return 0, 0, nil
	}
	byRoom := make(map[string]string, len(tokens))
	for _, t := range tokens {
		byRoom[store.Room(t)] = t
	}
	now := h.now()
	if _, err := h.store.Prune(now.Add(-h.history)); err != nil {
		return 0, 0, err
	}
	var recs []store.Record
	if err := h.store.All(func(r store.Record) error {
		if _, ok := byRoom[r.Room]; ok {
			recs = append(recs, r)
		}
		return nil
	}); err != nil {
		return 0, 0, err
	}
	for _, rec := range recs {
		token := byRoom[rec.Room]
		r := h.room(token)
		req := requestOf(rec)
		if rec.Status != store.Pending {
			if rec.Status == store.Answered && rec.ClosedNote == NoteUndelivered && !rec.ClosedAt.Before(now.Add(-h.missedFor)) {
				h.restoreMissed(r, token, rec)
			}
			if rec.ClosedAt.Before(now.Add(-h.retention)) {
				continue // history only; too old to re-attach to
			}
			s := &settled{sum: req.digest(), at: rec.ClosedAt}
			switch rec.Status {
			case store.Answered:
				s.reply = decodeReply(rec.Reply)
			case store.TimedOut:
				s.err = ErrTimeout
			default:
				s.err = ErrWithdrawn
			}
			r.mu.Lock()
			r.keepSettled(rec.ID, s, now.Add(-h.retention))
			r.mu.Unlock()
			settledN++
			continue
		}
		p := &pending{req: req, sum: req.digest(), token: token, createdAt: rec.CreatedAt, deadline: rec.Deadline, done: make(chan struct{}), shown: true}
		r.mu.Lock()
		r.pending[rec.ID] = p
		if req.Timeout > 0 && !now.Before(rec.Deadline) {
			r.mu.Unlock()
			_ = h.settle(r, p, nil, ErrTimeout, "timeout") // not saved: it times out again at the next start
			continue
		}
		h.arm(r, p)
		h.orphanLocked(r, p)
		r.mu.Unlock()
		pendingN++
	}
	h.log.Info("restored requests", "pending", pendingN, "settled", settledN)
	return pendingN, settledN, nil
}

// requestOf is the request a record keeps.
func requestOf(rec store.Record) Request {
	return Request{Kind: Kind(rec.Kind), ID: rec.ID, ProjectDirectory: rec.ProjectDirectory, Text: rec.Text,
		Timeout:   time.Duration(rec.TimeoutSeconds) * time.Second,
		AgentName: rec.AgentName, ReasoningModelName: rec.ReasoningModelName, McpClientName: rec.McpClientName}
}

// encodeReply stores a reply as the wire's response message; who answered
// travels in its Meta under reserved keys.
func encodeReply(rep *Reply) []byte {
	b, _ := proto.Marshal(&pb.AskQuestionResponse{IsError: rep.IsError, Meta: rep.Meta, Contents: rep.Contents})
	// The reserved keys are appended as two more entries of the Meta map
	// (field 3): the same message as if they were in the map, without
	// copying it.
	for _, kv := range [2][2]string{{"\x00clientId", rep.ClientID}, {"\x00nickname", rep.Nickname}} {
		var entry []byte
		entry = protowire.AppendTag(entry, 1, protowire.BytesType)
		entry = protowire.AppendString(entry, kv[0])
		entry = protowire.AppendTag(entry, 2, protowire.BytesType)
		entry = protowire.AppendString(entry, kv[1])
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, entry)
	}
	return b
}

func decodeReply(b []byte) *Reply {
	var m pb.AskQuestionResponse
	if proto.Unmarshal(b, &m) != nil {
		return &Reply{}
	}
	rep := &Reply{IsError: m.IsError, Contents: m.Contents, ClientID: m.Meta["\x00clientId"], Nickname: m.Meta["\x00nickname"]}
	delete(m.Meta, "\x00clientId")
	delete(m.Meta, "\x00nickname")
	if len(m.Meta) > 0 {
		rep.Meta = m.Meta
	}
	return rep
}

// History pages through the settled requests of token, newest first.
func (h *Hub) History(token string, before time.Time, limit int) ([]*pb.HistoryItem, bool, error) {
	if h.store == nil {
		return nil, false, nil
	}
	recs, more, err := h.store.History(store.Room(token), before, limit)
	if err != nil {
		return nil, false, err
	}
	out := make([]*pb.HistoryItem, 0, len(recs))
	for _, rec := range recs {
		p := &pending{req: requestOf(rec), token: token, createdAt: rec.CreatedAt}
		it := &pb.HistoryItem{MessageType: p.req.Kind.String(), CreatedAt: rec.CreatedAt.UnixMilli(), Status: rec.Status, ClosedAt: rec.ClosedAt.UnixMilli()}
		if p.req.Kind == AskQuestion {
			it.AskQuestionRequest = askRequest(p)
		} else {
			it.TaskFinishRequest = taskRequest(p)
		}
		if rec.Status == store.Answered {
			rep := decodeReply(rec.Reply)
			it.Response = AskResponse(rec.ID, rep)
			it.AnsweredBy = rep.Nickname
		}
		out = append(out, it)
	}
	return out, more, nil
}

// ClearHistory deletes the settled requests of token.
func (h *Hub) ClearHistory(token string) (int, error) {
	if h.store == nil {
		return 0, nil
	}
	return h.store.Clear(store.Room(token))
}
