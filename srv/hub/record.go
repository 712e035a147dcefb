package hub

import (
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// The mapping between requests and the store's records.

// record is p's state as a store record.
func (h *Hub) record(r *room, p *pending, status string, rep *Reply, note string) store.Record {
	rec := store.Record{
		Room: r.digest, ID: p.req.ID, Kind: int(p.req.Kind),
		ProjectDirectory: p.req.ProjectDirectory, Text: p.req.Text,
		TimeoutSeconds: int64(p.req.Timeout / time.Second), CreatedAt: p.createdAt, Deadline: p.deadline,
		Status: status, ClosedNote: note,
		AgentName: p.req.AgentName, ReasoningModelName: p.req.ReasoningModelName, McpClientName: p.req.McpClientName,
		WithdrawOnLeave: p.req.WithdrawOnLeave, TaskFinishEra: p.req.TaskFinishEra,
		Questions: encodeQuestions(p.req.Questions),
	}
	if status != store.Pending {
		rec.ClosedAt = h.now()
	}
	if rep != nil {
		rec.Reply, rec.ReplyDoor = encodeReply(rep), rep.Door
	}
	return rec
}

// replyOf is the answer rec keeps, with the way it came.
func replyOf(rec store.Record) *Reply {
	rep := decodeReply(rec.Reply)
	rep.Door = rec.ReplyDoor
	return rep
}

// requestOf is the request a record keeps.
func requestOf(rec store.Record) Request {
	return Request{Kind: wire.Kind(rec.Kind), ID: rec.ID, ProjectDirectory: rec.ProjectDirectory, Text: rec.Text,
		Timeout:   time.Duration(rec.TimeoutSeconds) * time.Second,
		AgentName: rec.AgentName, ReasoningModelName: rec.ReasoningModelName, McpClientName: rec.McpClientName,
		WithdrawOnLeave: rec.WithdrawOnLeave, TaskFinishEra: rec.TaskFinishEra, Questions: decodeQuestions(rec.Questions)}
}

// encodeQuestions stores the choices as the wire's McpAskQuestionRequest
// carrying only its Questions; nil for none.
func encodeQuestions(qs []*pb.Question) []byte {
	if len(qs) == 0 {
		return nil
	}
	b, _ := proto.Marshal(&pb.McpAskQuestionRequest{Questions: qs})
	return b
}

func decodeQuestions(b []byte) []*pb.Question {
	if len(b) == 0 {
		return nil
	}
	var m pb.McpAskQuestionRequest
	if proto.Unmarshal(b, &m) != nil {
		return nil
	}
	return m.Questions
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

// keptReply is what replyOf returns for the record of rep, without
// the round trip; nil when rep is nil, or names a reserved key itself
// (that one is decoded).
func keptReply(rep *Reply) *Reply {
	if rep == nil {
		return nil
	}
	_, id := rep.Meta["\x00clientId"]
	_, nick := rep.Meta["\x00nickname"]
	if id || nick {
		return nil
	}
	k := &Reply{IsError: rep.IsError, Contents: rep.Contents, ClientID: rep.ClientID, Nickname: rep.Nickname, Door: rep.Door}
	if len(rep.Meta) > 0 {
		k.Meta = rep.Meta
	}
	return k
}

// outcome is outcomeOf(rec.Record), with the reply this process wrote
// rather than decoding it again.
func (rec *SharedRecord) outcome() *settled {
	if rec.reply != nil && rec.Status == store.Answered {
		return &settled{at: rec.ClosedAt, reply: rec.reply, bytes: rec.Bytes()}
	}
	return outcomeOf(rec.Record)
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
