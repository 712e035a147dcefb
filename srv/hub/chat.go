package hub

import (
	"time"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// Chat and remote input between two clients of a room.

// Chat delivers a chat message from one client of token to another.
//
// In cluster mode a receiver connected to another instance gets it
// through that instance; Chat returns once that instance queued it to the
// receiver's connection (what a chat accepted means on one instance too),
// ErrNoReceiver when it did not.
func (h *Hub) Chat(token string, from Client, to, content string) (*pb.ChatMessage, error) {
	r := h.room(token)
	msg, far, err := r.chat(from, to, content, h.now())
	if far != nil {
		err = h.deliver(r, far, chatFrame(msg))
	}
	if err != nil {
		return nil, err
	}
	return msg, nil
}

// Backspace forwards a remote-input backspace from one client of token to
// another: the receiver gets Cmd SendBackspace naming the sender.
func (h *Hub) Backspace(token string, from Client, to string) error {
	r := h.room(token)
	r.mu.Lock()
	recv := r.clients[to]
	far := r.remoteReceiver(to)
	r.mu.Unlock()
	if recv == nil && far == nil {
		return ErrNoReceiver
	}
	frame := marshal(&pb.WebsocketMessage{
		Cmd:                  wire.CmdSendBackspace,
		SendBackspaceRequest: &pb.SendBackspaceRequest{ReceiverClientId: to},
		StrParam:             from.ID(),
		Nickname:             from.Nickname(),
	})
	if recv == nil {
		return h.deliver(r, far, frame)
	}
	recv.Send(frame)
	return nil
}

// chat sends the line to a receiver connected here; for one connected to
// another instance it returns the line and the receiver, to deliver once
// the lock is released.
func (r *room) chat(from Client, to, content string, now time.Time) (*pb.ChatMessage, *remote, error) {
	r.mu.Lock()
	var recv Client
	var far *remote
	if c := r.clients[to]; c != nil {
		recv = c
	} else if far = r.remoteReceiver(to); far != nil {
		recv = far
	}
	r.mu.Unlock()
	if recv == nil {
		return nil, nil, ErrNoReceiver
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
	if far != nil {
		return msg, far, nil
	}
	recv.Send(chatFrame(msg))
	return msg, nil, nil
}
