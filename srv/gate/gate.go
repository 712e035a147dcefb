// Package gate is the one way a WebSocket door (/ws, /agent/ws,
// /ingress/ws) takes a connection, in the same order everywhere, before
// anything of the door's own: the Origin checked (a page of another
// site is refused), a place among the connections that have not shown
// the token yet (auth.Pending: bounded in all and per address, the
// oldest waiting evicted for a newcomer; a valid token in the upgrade
// has a place of its own), the upgrade, the read limit and deadline of
// what comes before the token, and the set that owns the connection.
package gate

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/agentassistant/agentassistant/srv/auth"
	"github.com/agentassistant/agentassistant/srv/wsconn"
)

// Door is what a WebSocket endpoint checks and where its connections go.
type Door struct {
	Guard   *auth.Guard
	Pending *auth.Pending
	Conns   *wsconn.Set
	Conn    wsconn.Options
	Log     *slog.Logger
}

// Accept takes the connection r asks for, reading at most limit bytes a
// frame until the deadline (the door's login, join or hello), or
// answers the request itself and returns nil. The connection's place
// before the token is given back once the door makes it active
// (Conn.Active) or it ends.
func (d Door) Accept(w http.ResponseWriter, r *http.Request, limit int64, deadline time.Time) *wsconn.Conn {
	if !d.Guard.OriginAllowed(r) {
		http.Error(w, "forbidden origin", http.StatusForbidden)
		return nil
	}
	ev := &wsconn.Evictable{}
	release, err := d.Pending.AcquireUpgrade(r, ev.Evict)
	if err != nil {
		d.Log.Debug("connection refused before the upgrade", "remote", auth.Key(r.RemoteAddr), "err", err)
		auth.RefusePending(w, err)
		return nil
	}
	c, err := wsconn.Upgrade(w, r, d.Conn)
	if err != nil {
		release()
		d.Log.Debug("websocket handshake refused", "remote", auth.Key(r.RemoteAddr), "err", err)
		return nil // the upgrade has answered
	}
	c.UntilActive(release)
	ev.Set(c)
	c.SetReadLimit(limit)
	c.SetReadDeadline(deadline)
	if !d.Conns.Add(c) {
		c.Finish()
		return nil
	}
	return c
}
