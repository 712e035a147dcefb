package ingress

import (
	"time"

	"github.com/agentassistant/agentassistant/internal/lockorder"
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
	ring      []kept // oldest first
	ringBytes int64  // the frames' bytes in ring, counted in Handler.held too
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
	return &session{h: h, id: info.SessionID, info: info, relay: relay, devices: map[*device]struct{}{},
		runs: map[string]*run{}, starting: map[*run]struct{}{}, tools: map[string]*toolCall{}, approvals: map[string]*approval{}, activity: h.now()}
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
	now := s.h.now()
	s.activity = now
	s.trimLocked(now)
	var replay [][]byte
	gap := false
	if lastSeq != nil && *lastSeq < s.seq {
		first := s.seq + 1 // the oldest kept
		if len(s.ring) > 0 {
			first = s.ring[0].seq
		}
		gap = *lastSeq+1 < first
		for _, k := range s.ring {
			if k.seq > *lastSeq {
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
	s.activity = s.h.now()
	s.mu.Unlock()
}

// broadcastLocked numbers ev, keeps it for the replay window and sends it
// to every device. Called with mu held: numbering and sending are one
// step, so every device gets the events in their order.
func (s *session) broadcastLocked(ev Event) {
	now := s.h.now()
	if ev.Ts == 0 {
		ev.Ts = now.UnixMilli()
	}
	s.seq++
	ev.Seq = s.seq
	b, ok := encode(ev)
	if !ok {
		s.h.log.Warn("ingress event not encodable; dropped", "type", ev.Type, "session", s.id)
		return
	}
	s.activity = now
	s.ring = append(s.ring, kept{seq: ev.Seq, at: now, frame: b})
	s.ringBytes += int64(len(b))
	s.h.held.Add(int64(len(b)))
	s.trimLocked(now)
	for d := range s.devices {
		d.c.Send(b)
	}
}

// trimLocked drops the oldest events while they are past the replay
// window, or the ring is over its count or bytes, or all the sessions'
// rings are over ReplayTotalBytes (then this session gives up its own
// oldest, down to nothing: what it holds is bounded by its own budget,
// the total by the sum). The ring stays a run of consecutive events, so
// attach can tell a device what it missed (gap).
func (s *session) trimLocked(now time.Time) {
	cut := 0
	over := len(s.ring) - s.h.o.ReplayEvents
	o := &s.h.o
	for cut < len(s.ring) && (cut < over || now.Sub(s.ring[cut].at) > o.ReplayWindow ||
		s.ringBytes > o.ReplayBytes || s.h.held.Load() > o.ReplayTotalBytes) {
		n := int64(len(s.ring[cut].frame))
		s.ringBytes -= n
		s.h.held.Add(-n)
		s.ring[cut] = kept{} // the frame is garbage now, not when the array moves
		cut++
	}
	if cut > 0 {
		s.ring = s.ring[cut:] // append moves what is left when it grows
	}
}

// dropRingLocked lets go of every kept event: the session has ended.
func (s *session) dropRingLocked() {
	s.h.held.Add(-s.ringBytes)
	s.ring, s.ringBytes = nil, 0
}

// broadcast is broadcastLocked for callers without the lock.
func (s *session) broadcast(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broadcastLocked(ev)
}
