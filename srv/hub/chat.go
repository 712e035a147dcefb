package hub

import (
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// Chat and remote input between two clients of a room.

// Chat delivers a chat message from one client of token to another.
func (h *Hub) Chat(token string, from Client, to, content string) (*pb.ChatMessage, error) {
	return h.room(token).chat(from, to, content, h.now())
}

// Backspace forwards a remote-input backspace from one client of token to
// another: the receiver gets Cmd SendBackspace naming the sender.
func (h *Hub) Backspace(token string, from Client, to string) error {
	r := h.room(token)
	r.mu.Lock()
	recv := r.clients[to]
	r.mu.Unlock()
	if recv == nil {
		return ErrNoReceiver
	}
	recv.Send(marshal(&pb.WebsocketMessage{
		Cmd:                  wire.CmdSendBackspace,
		SendBackspaceRequest: &pb.SendBackspaceRequest{ReceiverClientId: to},
		StrParam:             from.ID(),
		Nickname:             from.Nickname(),
	}))
	return nil
}

func (r *room) chat(from Client, to, content string, now time.Time) (*pb.ChatMessage, error) {
	r.mu.Lock()
	recv := r.clients[to]
	r.mu.Unlock()
	if recv == nil {
		return nil, ErrNoReceiver
	}
	msg := &pb.ChatMessage{
		MessageId:        wire.NewID(),
		SenderClientId:   from.ID(),
		SenderNickname:   from.Nickname(),
		ReceiverClientId: recv.ID(),
		ReceiverNickname: recv.Nickname(),
		Content:          content,
		SentAt:           now.Unix(),
	}
	recv.Send(marshal(&pb.WebsocketMessage{
		Cmd:                     wire.CmdChatMessageNotification,
		ChatMessageNotification: &pb.ChatMessageNotification{ChatMessage: msg},
	}))
	return msg, nil
}
