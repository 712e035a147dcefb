package relay

import (
	"context"
	"errors"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/studylog"
)

// The study session: opened by session.start (or the host's own UI),
// closed by session.ended or when the host's grace runs out; while open,
// every event is in its JSONL log before it is forwarded.

// openSession starts a study session, or tells p why not (and returns
// it): past its token's study logs (studylog's bounds), a new one is
// refused, and nothing logged before is touched to make room.
func (ch *channel) openSession(p Peer, replyTo string) *Error {
	if ch.r.o.Logs == nil {
		e := errorf(wire.ToolExecutionFailed, "study logs are not configured on this server")
		ch.fail(p, replyTo, e)
		return e
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
	l, err := ch.r.o.Logs.Create(ch.token, time.Now(), reserve)
	if err != nil {
		files, bytes := ch.r.o.Logs.Limits()
		var e *Error
		switch {
		case errors.Is(err, studylog.ErrTooManyFiles):
			e = errorf(wire.InvalidMessage, "no study session started: this token has started %d study sessions since the server started, "+
				"the most it may ([studylog] max_files_per_token); no log is deleted to make room: ask the operator to raise the setting", files)
		case errors.Is(err, studylog.ErrFull):
			e = errorf(wire.InvalidMessage, "no study session started: this token's study logs hold %d bytes since the server started, "+
				"the most they may ([studylog] max_bytes_per_token); no log is cut to make room: ask the operator to raise the setting", bytes)
		default:
			ch.r.log.Error("open study log", "err", err)
			e = errorf(wire.ToolExecutionFailed, "cannot open the study log")
		}
		ch.fail(p, replyTo, e)
		return e
	}
	ch.log = l
	ch.r.log.Info("study session started", "session", l.ID(), "relay", ch.name)
	ch.tellHost()
	ch.noteHome()
	return nil
}

// logFull is the error for an event not sent on because the study log of
// its session could not take it (see stopLogging).
func (ch *channel) logFull(typ, session string) *Error {
	_, bytes := ch.r.o.Logs.Limits()
	return errorf(wire.InvalidMessage, "%s not sent: the study log could not take it, its token's study logs would pass %d bytes "+
		"([studylog] max_bytes_per_token), so study session %s was ended (nothing logged is lost); "+
		"ask the operator to raise the setting before starting another", typ, bytes, session)
}

// stopLogging ends the study session whose log could not take an event:
// its last line says why (it has room kept for it), its agents are told
// as when a host's grace runs out (session.ended, reason
// "log_full"), and its host by relay.session. What follows is
// outside a study session: an agent's request that needs one is refused,
// nothing more is logged. Called with mu held.
func (ch *channel) stopLogging() {
	_, bytes := ch.r.o.Logs.Limits()
	env := Envelope{Type: wire.TypeSessionEnded, Payload: mustJSON(map[string]any{
		"sessionId": ch.log.ID(), "logFile": ch.log.RelPath(), "stateReset": true, "reason": "log_full",
		"limit": map[string]any{"setting": "[studylog] max_bytes_per_token", "bytes": bytes},
	})}
	if err := ch.log.AppendLast(time.Now(), studylog.Internal, env.Type, "", "", env.Payload); err != nil {
		ch.r.log.Error("study log", "session", ch.log.ID(), "err", err)
	}
	ch.r.log.Warn("study log full: study session ended", "session", ch.log.ID(), "relay", ch.name, "max_bytes_per_token", bytes)
	ch.closeSession()
	ch.toAgents(env, nil)
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
	ch.host.deliver(Envelope{Type: wire.TypeSession, Payload: mustJSON(p)}, nil)
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
