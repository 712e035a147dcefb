package push

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentassistant/agentassistant/internal/strictjson"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/store"
)

// The HTTP side. The server guards Key, Subscribe and Unsubscribe with
// the token (and the Origin check). A notification answers through
// srv/answercap's endpoint, with its capability.

// Bounds of what a device sends.
const (
	maxRequest  = 8 << 10
	maxEndpoint = 2048
	maxDevice   = 64
	maxReplies  = 8
	maxPerRoom  = MaxSubscriptionsPerToken
)

// Key answers the VAPID public key: {"publicKey": "..."}.
func (p *Pusher) Key(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"publicKey": p.o.Keys.Public})
}

// subscribeRequest is a browser's PushSubscription.toJSON(), with the
// device's name and the person's quick replies.
type subscribeRequest struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		P256dh string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
	Device  string   `json:"device"`
	Replies []string `json:"replies"`
}

// Subscribe keeps the subscription posted for the token's room: 201
// {"id": ...}; the same endpoint again replaces it.
func (p *Pusher) Subscribe(token string) http.Handler {
	return p.posted(token, func(w http.ResponseWriter, _ *http.Request, req subscribeRequest, room string, subs []Subscription) {
		id := wire.NewID()
		same := false
		for _, s := range subs {
			if s.Endpoint == req.Endpoint {
				id, same = s.ID, true
			}
		}
		if !same && len(subs) >= maxPerRoom {
			writeError(w, http.StatusConflict, tooMany)
			return
		}
		s := Subscription{ID: id, Endpoint: req.Endpoint, P256dh: req.Keys.P256dh, Auth: req.Keys.Auth,
			Device: req.Device, Replies: req.Replies, Created: p.o.Now()}
		err := p.o.Subscriptions.Put(room, s)
		if errors.Is(err, ErrTooManySubscriptions) {
			// Another process of a cluster took the last room meanwhile.
			writeError(w, http.StatusConflict, tooMany)
			return
		}
		if err != nil {
			p.log.Error("push subscription not kept", "err", err)
			writeError(w, http.StatusInternalServerError, "the subscription cannot be saved")
			return
		}
		p.log.Info("push subscription kept", "subscription", id, "device", req.Device)
		writeJSON(w, http.StatusCreated, map[string]string{"id": id})
	})
}

// Renew gives the token's subscription named by the path's {id} the
// endpoint and keys posted ({"endpoint", "keys"}: the browser's new
// PushSubscription, after the push service changed or expired the old
// one), keeping its ID, device and replies: 200 {"id", "changed"}, or
// 404 when the token has none of that ID (a push service called it gone
// and it was removed: the device subscribes again). A device name or
// replies sent with it are not taken: PUT changes where pushes go only.
func (p *Pusher) Renew(token string) http.Handler {
	return p.posted(token, func(w http.ResponseWriter, r *http.Request, req subscribeRequest, room string, subs []Subscription) {
		id := r.PathValue("id")
		i := slices.IndexFunc(subs, func(s Subscription) bool { return s.ID == id })
		if i < 0 {
			writeError(w, http.StatusNotFound, "no such subscription")
			return
		}
		s := subs[i]
		changed := s.Endpoint != req.Endpoint || s.P256dh != req.Keys.P256dh || s.Auth != req.Keys.Auth
		if changed {
			s.Endpoint, s.P256dh, s.Auth = req.Endpoint, req.Keys.P256dh, req.Keys.Auth
			// Put drops another subscription of this endpoint: the
			// device's, made again before this came.
			if err := p.o.Subscriptions.Put(room, s); err != nil {
				p.log.Error("push subscription not renewed", "subscription", id, "err", err)
				writeError(w, http.StatusInternalServerError, "the subscription cannot be saved")
				return
			}
			p.log.Info("push subscription renewed", "subscription", id, "device", s.Device)
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "changed": changed})
	})
}

// posted is a handler that reads and checks the subscription posted,
// then calls fn with it and the token's room's subscriptions as they
// are, holding the lock that orders their changes until fn returns.
func (p *Pusher) posted(token string, fn func(w http.ResponseWriter, r *http.Request, req subscribeRequest, room string, subs []Subscription)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req subscribeRequest
		if !readJSON(w, r, maxRequest, &req) {
			return
		}
		if why := p.checkSubscription(&req); why != "" {
			writeError(w, http.StatusBadRequest, why)
			return
		}
		room := store.Room(token)
		p.subscribing.Lock()
		defer p.subscribing.Unlock()
		subs, err := p.o.Subscriptions.List(room)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "the subscriptions cannot be read")
			return
		}
		fn(w, r, req, room, subs)
	})
}

// checkSubscription says what is wrong with req, "" when nothing.
func (p *Pusher) checkSubscription(req *subscribeRequest) string {
	u, err := url.Parse(req.Endpoint)
	switch {
	case len(req.Endpoint) > maxEndpoint || err != nil || u.Host == "" || u.User != nil:
		return "endpoint must be the push service's URL"
	case u.Scheme != "https" && (!p.o.AllowHTTP || u.Scheme != "http"):
		return "endpoint must be an https URL (push services are)"
	}
	if !p.o.AllowPrivateEndpoints {
		if why := endpointHost(u.Hostname()); why != "" {
			return why
		}
	}
	if k, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(req.Keys.P256dh, "=")); err != nil || len(k) != 65 || k[0] != 4 {
		return "keys.p256dh must be the subscription's P-256 public key, base64url"
	}
	if k, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(req.Keys.Auth, "=")); err != nil || len(k) != 16 {
		return "keys.auth must be the subscription's 16-byte secret, base64url"
	}
	req.Device = strings.TrimSpace(req.Device)
	if !utf8.ValidString(req.Device) || len(req.Device) > maxDevice {
		return "device must be a name of at most 64 bytes"
	}
	if len(req.Replies) > maxReplies {
		return "replies: at most 8"
	}
	for _, r := range req.Replies {
		if !utf8.ValidString(r) || strings.TrimSpace(r) == "" || len(r) > maxAction {
			return "replies: each a text of 1 to 40 bytes"
		}
	}
	return ""
}

// Unsubscribe drops the token's subscription named by the path's {id}:
// 204, or 404 when the token has none of that ID.
func (p *Pusher) Unsubscribe(token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, err := p.o.Subscriptions.Remove(store.Room(token), ByID(r.PathValue("id")))
		switch {
		case err != nil:
			writeError(w, http.StatusInternalServerError, "the subscription cannot be removed")
		case !ok:
			writeError(w, http.StatusNotFound, "no such subscription")
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
}

// readJSON reads r's body (at most limit bytes) into v, one JSON value
// of v's fields only; false when it answered the error.
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "the body is too large")
		return false
	case err != nil:
		// Cut off at the body deadline, or broken off: send it again.
		writeError(w, http.StatusRequestTimeout, "the body did not arrive whole in time; send it again")
		return false
	}
	// One meaning only: a key given twice, in any case, is refused
	// rather than read as its last.
	if err := strictjson.Unmarshal(b, v); err != nil {
		writeError(w, http.StatusBadRequest, "the body must be one JSON object of the documented form: "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, why string) {
	writeJSON(w, code, map[string]string{"error": why})
}
