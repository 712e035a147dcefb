package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/agentassistant/agentassistant/internal/strictjson"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// Envelope is every message on /agent/ws.
type Envelope struct {
	V       string          `json:"v"`
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	ReplyTo string          `json:"replyTo,omitempty"`
	Payload json.RawMessage `json:"payload"`
}

// Error is a protocol error, sent as an "error" envelope.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error gives the code and the message, as the error frame carries
// them.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Refusal is why the relay refused what err answers, in the relay's
// words: an *Error's message alone, without its code.
func Refusal(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Message
	}
	return err.Error()
}

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

const maxIDLen = 256

// Parse decodes and checks one frame. On failure it still returns the
// frame's id when one could be read, so the error can name it in replyTo.
func Parse(data []byte) (Envelope, *Error) {
	var env Envelope
	if !utf8.Valid(data) {
		return env, errorf(wire.InvalidMessage, "frame is not valid UTF-8")
	}
	var raw struct {
		V       json.RawMessage `json:"v"`
		Type    json.RawMessage `json:"type"`
		ID      json.RawMessage `json:"id"`
		ReplyTo json.RawMessage `json:"replyTo"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return env, errorf(wire.InvalidMessage, "frame is not a JSON object: %v", err)
	}
	str := func(field string, r json.RawMessage, dst *string) *Error {
		if len(r) == 0 || string(r) == "null" {
			return nil
		}
		if err := json.Unmarshal(r, dst); err != nil {
			return errorf(wire.InvalidMessage, "%q must be a string", field)
		}
		return nil
	}
	if e := str("id", raw.ID, &env.ID); e != nil {
		return env, e
	}
	if len(env.ID) > maxIDLen {
		env.ID = ""
		return env, errorf(wire.InvalidMessage, "id longer than %d characters", maxIDLen)
	}
	// What the relay checks (backendData stripped, state kept) and what
	// it forwards must be one document: a key given twice has none.
	if err := strictjson.Check(data); err != nil {
		return env, errorf(wire.InvalidMessage, "frame refused: %v", err)
	}
	for _, f := range []struct {
		name string
		r    json.RawMessage
		dst  *string
	}{{"v", raw.V, &env.V}, {"type", raw.Type, &env.Type}, {"replyTo", raw.ReplyTo, &env.ReplyTo}} {
		if e := str(f.name, f.r, f.dst); e != nil {
			return env, e
		}
	}
	switch {
	case env.V == "":
		return env, errorf(wire.InvalidMessage, "missing \"v\": expected %q", wire.Version)
	case env.V != wire.Version:
		return env, errorf(wire.InvalidMessage, "unsupported version %q: expected %q", wire.Clip(env.V, 32), wire.Version)
	case env.Type == "":
		return env, errorf(wire.InvalidMessage, "missing \"type\"")
	case len(env.ReplyTo) > maxIDLen:
		return env, errorf(wire.InvalidMessage, "replyTo longer than %d characters", maxIDLen)
	}
	p := bytes.TrimSpace(raw.Payload)
	switch {
	case len(p) == 0 || string(p) == "null":
		return env, errorf(wire.InvalidMessage, "missing \"payload\": every envelope carries an object ({} when there is nothing in it)")
	case p[0] != '{':
		return env, errorf(wire.InvalidMessage, "\"payload\" must be an object")
	default:
		env.Payload = json.RawMessage(p)
	}
	return env, nil
}

// whole is env as it leaves the relay: the protocol's version, and {}
// for a payload left out.
func (env Envelope) whole() Envelope {
	env.V = wire.Version
	if len(env.Payload) == 0 {
		env.Payload = json.RawMessage("{}")
	}
	return env
}

// encode renders env for the wire. Payloads here are always valid JSON
// (parsed or built by us), so encoding cannot fail.
func encode(env Envelope) []byte {
	b, err := json.Marshal(env.whole())
	if err != nil {
		panic(fmt.Sprintf("encode %s envelope: %v", env.Type, err))
	}
	return b
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode payload: %v", err))
	}
	return b
}

// stripBackendData removes every "backendData" key, at any depth, from a
// payload: backend data drives the host UI and must never reach an agent
// or a log. The quick check keeps the common case free of a re-encode; a
// key spelt with escapes (\u0044) still takes the slow path. Parse has
// refused a key given twice, so the value stripped and re-encoded is the
// one the bytes hold, not the last of two.
func stripBackendData(p json.RawMessage) json.RawMessage {
	if !bytes.Contains(p, []byte("backendData")) && !bytes.Contains(p, []byte(`\u`)) {
		return p
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return p // Parse already checked it is an object; unreachable
	}
	if !strip(v) {
		return p
	}
	return mustJSON(v)
}

func strip(v any) (changed bool) {
	switch t := v.(type) {
	case map[string]any:
		if _, ok := t["backendData"]; ok {
			delete(t, "backendData")
			changed = true
		}
		for _, c := range t {
			changed = strip(c) || changed
		}
	case []any:
		for _, c := range t {
			changed = strip(c) || changed
		}
	}
	return changed
}

// setFields returns payload with the given top-level fields set.
func setFields(p json.RawMessage, kv map[string]any) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(p, &m); err != nil || m == nil {
		m = make(map[string]json.RawMessage)
	}
	for k, v := range kv {
		m[k] = mustJSON(v)
	}
	return mustJSON(m)
}
