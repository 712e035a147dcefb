package testhost

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Host is a connected booking host.
type Host struct {
	ws      *websocket.Conn
	writeMu sync.Mutex

	mu      sync.Mutex
	b       *booking
	session string
	// DropOn makes the host vanish (close its socket without answering)
	// when a tool.call for this tool arrives: the mid-call disconnect.
	dropOn string
	seen   []map[string]any // every envelope received, for assertions
	done   chan struct{}
}

// Options for Dial.
type Options struct {
	Session string // relay session; empty is "default"
	DropOn  string
}

// Dial joins baseURL's /agent/ws as host with token.
func Dial(baseURL, token string, o Options) (*Host, error) {
	u := strings.Replace(strings.TrimSuffix(baseURL, "/"), "http", "ws", 1) + "/agent/ws"
	ws, _, err := websocket.DefaultDialer.Dial(u, nil)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", u, err)
	}
	h := &Host{ws: ws, b: newBooking(), dropOn: o.DropOn, done: make(chan struct{})}
	h.send(map[string]any{"v": "mvp-0.2", "type": "relay.join", "id": "join-1",
		"payload": map[string]any{"role": "host", "sessionId": o.Session, "token": token}})
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	var joined map[string]any
	if err := ws.ReadJSON(&joined); err != nil {
		_ = ws.Close()
		return nil, fmt.Errorf("relay.join: %w", err)
	}
	if joined["type"] != "relay.joined" {
		_ = ws.Close()
		return nil, fmt.Errorf("relay.join answered %v", joined)
	}
	_ = ws.SetReadDeadline(time.Time{})
	go h.loop()
	h.publish("host") // initial state, so agents can see the first stage
	return h, nil
}

// Close leaves the relay.
func (h *Host) Close() { _ = h.ws.Close(); <-h.done }

// Done is closed when the connection has ended.
func (h *Host) Done() <-chan struct{} { return h.done }

// Seen returns the envelopes the host has received, oldest first.
func (h *Host) Seen() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]any(nil), h.seen...)
}

// UISpec returns the current visible state (as the host has it, with its
// backend data).
func (h *Host) UISpec() map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.b.uiSpec()
}

// SayUser sends what the participant typed in the chat.
func (h *Host) SayUser(text string) {
	h.mu.Lock()
	h.b.messages = append(h.b.messages, map[string]string{"role": "user", "text": text})
	stage := h.b.stageName()
	h.mu.Unlock()
	h.send(map[string]any{"v": "mvp-0.2", "type": "user.message", "payload": map[string]any{"text": text, "stage": stage}})
	h.publish("user")
}

func (h *Host) send(v any) {
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	_ = h.ws.WriteJSON(v)
}

func (h *Host) reply(typ, replyTo string, payload any) {
	h.send(map[string]any{"v": "mvp-0.2", "type": typ, "replyTo": replyTo, "payload": payload})
}

func (h *Host) state() map[string]any {
	return map[string]any{"uiSpec": h.b.uiSpec(), "messageHistory": h.b.messages, "toolSchema": h.b.toolSchema()}
}

func (h *Host) publish(source string) {
	h.mu.Lock()
	p := h.state()
	h.mu.Unlock()
	p["source"] = source
	h.send(map[string]any{"v": "mvp-0.2", "type": "state.updated", "payload": p})
}

func (h *Host) loop() {
	defer close(h.done)
	for {
		var env struct {
			Type    string          `json:"type"`
			ID      string          `json:"id"`
			Payload json.RawMessage `json:"payload"`
		}
		_, data, err := h.ws.ReadMessage()
		if err != nil {
			return
		}
		if json.Unmarshal(data, &env) != nil {
			continue
		}
		var raw map[string]any
		_ = json.Unmarshal(data, &raw)
		h.mu.Lock()
		h.seen = append(h.seen, raw)
		h.mu.Unlock()
		h.handle(env.Type, env.ID, env.Payload)
	}
}

func (h *Host) handle(typ, id string, payload json.RawMessage) {
	switch typ {
	case "session.start":
		var p struct {
			SessionID string `json:"sessionId"`
		}
		_ = json.Unmarshal(payload, &p)
		h.mu.Lock()
		h.session = p.SessionID
		h.mu.Unlock()
		h.reply("session.started", id, map[string]any{"sessionId": p.SessionID})
	case "snapshot.get":
		h.mu.Lock()
		p := h.state()
		p["sessionId"] = h.session
		h.mu.Unlock()
		h.reply("snapshot.state", id, p)
	case "tool.call":
		var p struct {
			ToolName string          `json:"toolName"`
			Params   json.RawMessage `json:"params"`
			Reason   string          `json:"reason"`
		}
		_ = json.Unmarshal(payload, &p)
		if h.dropOn != "" && p.ToolName == h.dropOn {
			_ = h.ws.Close()
			return
		}
		h.mu.Lock()
		withSpec, terr := h.b.apply(p.ToolName, p.Params)
		spec := h.b.uiSpec()
		h.mu.Unlock()
		if terr != nil {
			h.reply("error", id, map[string]any{"code": terr.code, "message": terr.msg})
			return
		}
		res := map[string]any{"ok": true, "toolName": p.ToolName}
		if withSpec {
			res["uiSpec"] = spec
		}
		h.reply("tool.result", id, res)
		h.publish("agent")
	case "agent.message":
		var p struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(payload, &p)
		h.mu.Lock()
		h.b.messages = append(h.b.messages, map[string]string{"role": "agent", "text": p.Text})
		h.mu.Unlock()
		h.publish("agent")
	case "session.end":
		h.mu.Lock()
		sid := h.session
		h.b = newBooking()
		h.session = ""
		h.mu.Unlock()
		h.reply("session.ended", id, map[string]any{"sessionId": sid})
		h.publish("host")
	}
}
