package relay

import (
	"context"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// The study session: opened by session.start (or the host's own UI),
// closed by session.ended or when the host's grace runs out; while open,
// every event is in its JSONL log before it is forwarded.

func (ch *channel) openSession(p *peer, replyTo string) bool {
	if ch.r.o.Logs == nil {
		ch.fail(p, replyTo, errorf(wire.ToolExecutionFailed, "study logs are not configured on this server"))
		return false
	}
	var reserve func(string) (bool, error)
	if c := ch.r.o.Cluster; c != nil {
		// Ids unique cluster-wide: a study session that moves takes its
		// id to another instance's directory (cluster.go). This waits on
		// NATS under the session's lock, bounded, once per session.start.
		reserve = func(id string) (bool, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return c.Reserve(ctx, id)
		}
	}
	l, err := ch.r.o.Logs.CreateReserved(ch.r.now(), reserve)
	if err != nil {
		ch.r.log.Error("open study log", "err", err)
		ch.fail(p, replyTo, errorf(wire.ToolExecutionFailed, "cannot open the study log"))
		return false
	}
	ch.log = l
	ch.r.log.Info("study session started", "session", l.ID(), "relay", ch.name)
	ch.tellHost()
	ch.noteHome()
	return true
}

// tellHost lets the host show the study session, however it was started.
func (ch *channel) tellHost() {
	if ch.host == nil {
		return
	}
	p := map[string]any{"active": ch.log != nil, "sessionId": ""}
	if ch.log != nil {
		p["sessionId"] = ch.log.ID()
	}
	ch.host.deliver(Envelope{Type: wire.TypeSession, Payload: mustJSON(p)})
}

func (ch *channel) closeSession() {
	if ch.log == nil {
		return
	}
	if err := ch.log.Close(); err != nil {
		ch.r.log.Error("close study log", "session", ch.log.ID(), "err", err)
	}
	ch.r.log.Info("study session ended", "session", ch.log.ID(), "relay", ch.name)
	ch.log = nil
	ch.tellHost()
	ch.noteHome()
}
