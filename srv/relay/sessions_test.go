package relay

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// localHost joins an in-process host to (token, name), as the relay does
// for a host on /agent/ws, and publishes a state.
func localHost(r *Relay, token, name string) (*localPeer, *channel) {
	ch := r.acquire(token, name)
	defer r.release(ch)
	p := ch.localPeer(maxInflight + 64) // takes every call the tests send it
	ch.joinHost(p, "j")
	ch.fromHost(p, Envelope{V: wire.Version, Type: wire.TypeStateUpdated, Payload: json.RawMessage(
		`{"uiSpec":{"stage":"movie"},"toolSchema":[{"name":"select"}]}`)})
	return p, ch
}

// TestHostGraceKeepsThenFrees: a relay session whose host left keeps the
// host's last state for the grace, a host coming back within it finds the
// session as it was, and past the grace the session is freed.
func TestHostGraceKeepsThenFrees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{HostGrace: time.Minute})
		defer r.Close()
		p, ch := localHost(r, "tok", "s")
		ch.leave(p)

		time.Sleep(59 * time.Second)
		synctest.Wait()
		l := r.Local("tok", "s")
		st := l.State()
		l.Close()
		if st.HostOnline || string(st.UISpec) != `{"stage":"movie"}` || len(st.Tools) != 1 || r.Sessions() != 1 {
			t.Fatalf("within the grace: %+v, %d sessions", st, r.Sessions())
		}

		// Back within the grace, then gone again: the first departure's
		// timer must not cut the second one's grace short.
		p, _ = localHost(r, "tok", "s")
		ch.leave(p)
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if r.Sessions() != 1 {
			t.Fatalf("%d sessions within the second grace", r.Sessions())
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if r.Sessions() != 0 {
			t.Fatalf("%d sessions past the grace", r.Sessions())
		}
		l = r.Local("tok", "s")
		if st := l.State(); st.UISpec != nil || st.Version != 0 {
			t.Fatalf("a freed session came back with %+v", st)
		}
		l.Close()
		if r.Sessions() != 0 {
			t.Fatalf("%d sessions after a look", r.Sessions())
		}
	})
}

// TestQueuedMessagesHoldTheSession: what a participant typed waits for an
// agent to take it, however long nobody else is there.
func TestQueuedMessagesHoldTheSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{HostGrace: time.Minute})
		defer r.Close()
		p, ch := localHost(r, "tok", "s")
		ch.fromHost(p, Envelope{V: wire.Version, Type: wire.TypeUserMessage, Payload: json.RawMessage(`{"text":"hi"}`)})
		ch.leave(p)
		time.Sleep(time.Hour)
		synctest.Wait()
		l := r.Local("tok", "s")
		env, ok := l.NextUserMessage(t.Context())
		l.Close()
		if !ok || string(env.Payload) != `{"text":"hi"}` {
			t.Fatalf("the queued message: %v %v", env, ok)
		}
		if r.Sessions() != 0 {
			t.Fatalf("%d sessions once the message was taken", r.Sessions())
		}
	})
}
