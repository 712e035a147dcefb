package push

import (
	"crypto/rand"
	"encoding/base64"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// A capability answers one question from one device's notification: the
// service worker posts it with the answer, and the token never travels in
// a push. It is unguessable (256 random bits), good once, and void as
// soon as the question is settled anywhere or its deadline passes.
type capability struct {
	token   string
	room    string
	kind    wire.Kind
	id      string
	sub     Subscription
	expires time.Time
}

// maxCaps bounds the capabilities held at once; the oldest expiring go
// first when it is reached (a device's notification then answers with
// an error and opens the app instead).
const maxCaps = 100_000

type caps struct {
	mu    sync.Mutex // held alone
	byCap map[string]*capability
	byReq map[string][]string // room + "\x00" + request ID → its capabilities
}

func newCaps() *caps {
	return &caps{byCap: map[string]*capability{}, byReq: map[string][]string{}}
}

func reqKey(room, id string) string { return room + "\x00" + id }

// make gives sub a capability for the question id of token's room.
func (c *caps) make(token, room string, kind wire.Kind, id string, sub Subscription, expires, now time.Time) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	name := base64.RawURLEncoding.EncodeToString(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byCap) >= maxCaps {
		c.pruneLocked(now)
	}
	c.byCap[name] = &capability{token: token, room: room, kind: kind, id: id, sub: sub, expires: expires}
	k := reqKey(room, id)
	c.byReq[k] = append(c.byReq[k], name)
	return name
}

// take returns the capability named and voids it: it is good once. The
// question's other devices' capabilities go when it is settled (void).
func (c *caps) take(name string, now time.Time) (*capability, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp := c.byCap[name]
	if cp == nil {
		return nil, false
	}
	delete(c.byCap, name)
	if now.After(cp.expires) {
		return nil, false
	}
	return cp, true
}

// void ends every capability of a settled question.
func (c *caps) void(room, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := reqKey(room, id)
	for _, name := range c.byReq[k] {
		delete(c.byCap, name)
	}
	delete(c.byReq, k)
}

// pruneLocked drops the expired capabilities, and when none is, the
// earliest to expire.
func (c *caps) pruneLocked(now time.Time) {
	var first string
	for name, cp := range c.byCap {
		if now.After(cp.expires) {
			delete(c.byCap, name)
			continue
		}
		if first == "" || cp.expires.Before(c.byCap[first].expires) {
			first = name
		}
	}
	if len(c.byCap) >= maxCaps && first != "" {
		delete(c.byCap, first)
	}
	for k, names := range c.byReq {
		live := names[:0]
		for _, n := range names {
			if c.byCap[n] != nil {
				live = append(live, n)
			}
		}
		if len(live) == 0 {
			delete(c.byReq, k)
		} else {
			c.byReq[k] = live
		}
	}
}
