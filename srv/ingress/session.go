package ingress

import (
	"cmp"
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"
	"github.com/agentassistant/agentassistant/internal/ring"
	"github.com/agentassistant/agentassistant/internal/wire"
)

// session is one Ingress session: its devices, the events sent to them
// (numbered, the recent ones kept for devices that reconnect), its runs,
// and the tool calls and approvals they wait on (run.go).
type session struct {
	h     *Handler
	id    string
	info  SessionInfo
	relay string // the relay session of the built-in orchestrator

	mu        lockorder.Mutex[lockorder.IngressSession]
	devices   map[*device]struct{}
	seq       uint64
	ring      *ring.Ring[kept] // the replay window, its bytes counted in Handler.held too
	runs      map[string]*run
	starting  map[*run]struct{} // invoked, no run id yet
	early     []Event           // pushed for a run not yet started (run.go)
	tools     map[string]*toolCall
	approvals map[string]*approval
	activity  time.Time
	idle      *time.Timer // armed while no device is connected
	joining   int         // hellos between join and attach
	freed     bool
}

// kept is an event kept for the replay window.
type kept struct {
	seq   uint64
	at    time.Time
	frame []byte
}

func newSession(h *Handler, info SessionInfo, relay string) *session {
	// The replay window: its events, bytes and age, and every session's
	// bytes together (past ReplayTotalBytes a session gives up its own
	// oldest, down to nothing: what it holds is bounded by its own
	// budget, the total by the sum).
	r := ring.New(ring.Bounds[kept]{
		Count: replayEvents, Bytes: h.o.ReplayBytes, Age: h.o.ReplayWindow, Pool: &h.held,
		Size: func(k kept) int64 { return int64(len(k.frame)) },
		Time: func(k kept) time.Time { return k.at },
	})
	return &session{h: h, id: info.SessionID, info: info, relay: relay, devices: map[*device]struct{}{}, ring: r,
		runs: map[string]*run{}, starting: map[*run]struct{}{}, tools: map[string]*toolCall{}, approvals: map[string]*approval{}, activity: time.Now()}
}

// attach adds dev, which join held the session for, sends it hello_ack
// and, when it names the last event it has, what it missed since: under
// the session's lock, so nothing live comes between or twice.
func (s *session) attach(dev *device, lastSeq *uint64) *Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.joining--
	if len(s.devices) >= s.h.o.MaxDevices {
		s.idleLocked()
		return errorf(wire.IngressInvalidMessage, "hello: session %s has %d devices already (the most it may have)", s.id, s.h.o.MaxDevices)
	}
	if lastSeq != nil && *lastSeq > s.seq {
		s.idleLocked()
		return errorf(wire.IngressInvalidMessage, "hello: last_seq %d is beyond this session's last event (%d): it is another session's number; say hello without last_seq", *lastSeq, s.seq)
	}
	dev.s = s
	s.devices[dev] = struct{}{}
	if s.idle != nil {
		s.idle.Stop()
		s.idle = nil
	}
	now := time.Now()
	s.activity = now
	s.ring.Trim(now)
	var replay [][]byte
	gap := false
	if lastSeq != nil && *lastSeq < s.seq {
		first := s.seq + 1 // the oldest kept
		if s.ring.Len() > 0 {
			first = s.ring.At(0).seq
		}
		gap = *lastSeq+1 < first
		for i := range s.ring.Len() {
			if k := s.ring.At(i); k.seq > *lastSeq {
				replay = append(replay, k.frame)
			}
		}
	}
	last := s.seq
	dev.send(Event{Type: wire.IngressHelloAck, Ts: now.UnixMilli(), SessionID: s.id, LastSeq: &last, Replayed: len(replay), Gap: gap})
	for _, f := range replay {
		dev.c.Send(f)
	}
	return nil
}

// detach removes dev. The last device leaving cancels the session's runs
// (seed 003, M4) and starts the replay window, after which the session
// ends.
func (s *session) detach(dev *device) {
	s.mu.Lock()
	if _, ok := s.devices[dev]; !ok {
		s.mu.Unlock()
		return
	}
	delete(s.devices, dev)
	var runs []string
	if len(s.devices) == 0 {
		for id := range s.runs {
			runs = append(runs, id)
		}
		for r := range s.starting {
			r.cancelled = true
			r.cancel() // no run id to cancel at the orchestrator yet
		}
		s.idleLocked()
	}
	s.mu.Unlock()
	for _, id := range runs {
		s.h.log.Info("ingress run cancelled: its last device left", "session", s.id, "run", id)
		_ = s.cancelRun(id)
	}
}

// idleLocked starts the replay window of a session left without devices.
func (s *session) idleLocked() {
	if len(s.devices) == 0 && s.joining == 0 && !s.freed && s.idle == nil {
		s.idle = time.AfterFunc(s.h.o.ReplayWindow, func() { s.h.free(s) })
	}
}

func (s *session) touch() {
	s.mu.Lock()
	s.activity = time.Now()
	s.mu.Unlock()
}

// broadcastLocked numbers ev, keeps it for the replay window and sends it
// to every device. Called with mu held: numbering and sending are one
// step, so every device gets the events in their order.
func (s *session) broadcastLocked(ev Event) {
	now := time.Now()
	ev.Ts = cmp.Or(ev.Ts, now.UnixMilli())
	s.seq++
	ev.Seq = s.seq
	b, ok := encode(ev)
	if !ok {
		s.h.log.Warn("ingress event not encodable; dropped", "type", ev.Type, "session", s.id)
		return
	}
	s.activity = now
	s.ring.Push(kept{seq: ev.Seq, at: now, frame: b})
	s.ring.Trim(now)
	for d := range s.devices {
		d.c.Send(b)
	}
}

// dropRingLocked lets go of every kept event: the session has ended.
func (s *session) dropRingLocked() { s.ring.Clear() }

// broadcast is broadcastLocked for callers without the lock.
func (s *session) broadcast(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broadcastLocked(ev)
}
