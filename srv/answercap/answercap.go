// Package answercap makes and takes the capabilities that answer one
// question from outside the token's surfaces: a push notification's
// action, an ntfy button, a chat message's button. The token never
// travels there; a capability is unguessable (256 random bits), good
// once, for one question and one recipient, and void as soon as the
// question is settled anywhere or its deadline passes.
//
// Answer is the one HTTP endpoint that takes them (POST /push/answer):
// {"cap": "...", "text": "..."}.
package answercap

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	pb "github.com/agentassistant/agentassistant/gen/agentassistproto"
	"github.com/agentassistant/agentassistant/internal/strictjson"
	"github.com/agentassistant/agentassistant/internal/wire"
	"github.com/agentassistant/agentassistant/srv/hub"
)

// Cap is what a capability stands for.
type Cap struct {
	token string
	Room  string
	Kind  wire.Kind
	ID    string
	// Who answers with it, and through which door ("push", "ntfy"...):
	// the reply's nickname and client ID.
	Who, WhoID, Door string
	Expires          time.Time
	// Of is the Shown digest of its question (hub.Request): it answers
	// no other asked since under the question's ID that shows anything
	// else. Zero: whichever. One the release before made holds the
	// question's Digest (hub.Reply.Of says what that still answers).
	Of [sha256.Size]byte
	// Answers, when not nil, are the only texts it answers with: the
	// buttons its notification shows. A notification offers what the
	// person can mean by one tap; a capability that took any text would
	// let a single option answer a question that takes several, which no
	// button offered. Nil: any text the question allows (a typed reply).
	Answers []string
	// sums are a cluster's capability's Answers, as it holds them
	// (answerSum); nil with Answers nil.
	sums []string
}

// offers says whether c answers with text.
func (c *Cap) offers(text string) bool {
	switch {
	case c.sums != nil:
		return slices.Contains(c.sums, answerSum(text))
	case c.Answers != nil:
		return slices.Contains(c.Answers, text)
	}
	return true
}

// maxCaps bounds the capabilities held at once; at the bound the
// expired go, then the earliest to expire (its button then answers with
// an error and the person opens the app instead).
const maxCaps = 100_000

// Store holds the capabilities. Safe for concurrent use.
type Store struct {
	mu    sync.Mutex // held alone
	byCap map[string]*Cap
	byReq map[string][]string // room + "\x00" + request ID → its capabilities

	shared *signer // cluster mode (shared.go): no map, signed capabilities
	label  []byte  // Label's key
}

// New returns an empty store.
func New() *Store {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &Store{byCap: map[string]*Cap{}, byReq: map[string][]string{}, label: key}
}

// Label names what parts say (24 hex digits), the same for the same
// parts on every instance of a cluster and across restarts, yet nothing
// one without the server's key could make: an ntfy notification's
// sequence ID, read in its topic beside its question's ID, made of the
// token's room and that ID alone would let a reader check guesses of
// the token offline.
func (s *Store) Label(parts ...string) string {
	m := hmac.New(sha256.New, s.label)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil)[:12])
}

func reqKey(room, id string) string { return room + "\x00" + id }

// Make returns a new capability for c, whose token is token.
func (s *Store) Make(token string, c Cap, now time.Time) string {
	if s.shared != nil {
		return s.shared.make(c)
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	name := base64.RawURLEncoding.EncodeToString(b)
	c.token = token
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byCap) >= maxCaps {
		s.pruneLocked(now)
	}
	s.byCap[name] = &c
	k := reqKey(c.Room, c.ID)
	s.byReq[k] = append(s.byReq[k], name)
	return name
}

// Take returns the capability named and voids it: it is good once.
func (s *Store) Take(name string, now time.Time) (*Cap, bool) {
	c, err := s.take(name, now)
	return c, err == nil
}

// take is Take, saying why not: ErrVoid, or the cluster's error.
func (s *Store) take(name string, now time.Time) (*Cap, error) {
	if s.shared != nil {
		return s.shared.take(name, now)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.byCap[name]
	delete(s.byCap, name)
	if c == nil || now.After(c.Expires) {
		return nil, ErrVoid
	}
	return c, nil
}

// Void ends every capability of a settled question. In cluster mode
// the hub refuses them instead: their question is no longer pending.
func (s *Store) Void(room, id string) {
	if s.shared != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := reqKey(room, id)
	for _, name := range s.byReq[k] {
		delete(s.byCap, name)
	}
	delete(s.byReq, k)
}

// Follow voids the capabilities of every question the hub settles, until
// the returned function is called.
func (s *Store) Follow(h *hub.Hub, room func(token string) string) (stop func()) {
	return h.Subscribe(func(ev hub.Event) {
		if ev.Kind != hub.Asked {
			s.Void(room(ev.Token), ev.Request.ID)
		}
	})
}

// pruneLocked drops the expired capabilities, and when none is, the
// earliest to expire.
func (s *Store) pruneLocked(now time.Time) {
	var first string
	for name, c := range s.byCap {
		if now.After(c.Expires) {
			delete(s.byCap, name)
			continue
		}
		if first == "" || c.Expires.Before(s.byCap[first].Expires) {
			first = name
		}
	}
	if len(s.byCap) >= maxCaps && first != "" {
		delete(s.byCap, first)
	}
	for k, names := range s.byReq {
		if live := slices.DeleteFunc(names, func(n string) bool { return s.byCap[n] == nil }); len(live) > 0 {
			s.byReq[k] = live
		} else {
			delete(s.byReq, k)
		}
	}
}

// ErrVoid: the capability is unknown, used, void or expired.
var ErrVoid = errors.New("this button can no longer answer: the question was answered, withdrawn or timed out, or the answer was given already")

// ErrNotOffered: the text is not one of the capability's Answers.
var ErrNotOffered = errors.New("this button answers only with what its notification offered; open the app to answer otherwise")

// Use answers c's question with text, through the capability named,
// which it takes (good once).
//
// A text the capability does not offer (ErrNotOffered) does not spend
// it either.
//
// An answer the question does not allow (hub.ErrNotAnOption: a typed
// answer where only its options are) does not spend the capability: the
// person's next tap on an option still answers.
func (s *Store) Use(ctx context.Context, h *hub.Hub, name, text string, now time.Time) (*Cap, error) {
	return s.UseAll(ctx, h, name, []string{text}, now)
}

// UseAll is Use with several texts, one content each, in the order
// given: the options ticked of a question that takes several, as the
// inbox answers with them. Each must be one the capability offers.
func (s *Store) UseAll(ctx context.Context, h *hub.Hub, name string, texts []string, now time.Time) (*Cap, error) {
	contents := make([]*pb.McpResultContent, len(texts))
	for i, t := range texts {
		contents[i] = &pb.McpResultContent{Type: 1, Text: &pb.TextContent{Type: "text", Text: t}}
	}
	c, err := s.peek(name, now)
	if err != nil {
		return nil, err
	}
	if len(texts) == 0 || slices.ContainsFunc(texts, func(t string) bool { return !c.offers(t) }) {
		return nil, ErrNotOffered
	}
	rep := hub.Reply{Contents: contents, ClientID: c.Door + ":" + c.WhoID, Nickname: c.Who, Door: c.Door, Of: c.Of}
	allowed := h.Allows(ctx, c.token, c.Kind, c.ID, rep)
	if errors.Is(allowed, hub.ErrNotAnOption) {
		return nil, allowed
	}
	if c, err = s.take(name, now); err != nil {
		if errors.Is(err, ErrVoid) && s.shared != nil && allowed == nil {
			// Claimed in the cluster, yet its question waits: the
			// instance that claimed it is saving the answer still, or
			// died before it did (its claim is taken over once stale).
			// Not used up: tried again, it answers or is refused.
			return nil, fmt.Errorf("%w: the question waits while its answer is taken elsewhere", ErrUnsure)
		}
		return nil, err
	}
	err = h.Answer(ctx, c.token, c.Kind, c.ID, rep)
	if Unsaved(err) {
		s.giveBack(name, c) // the answer was not taken: the tap may be made again
	}
	return c, err
}

// Unsaved says err is an answer the server could not save just now (the
// disk full, the cluster's store out of reach, or a capability it could
// not check): nothing was taken, and the same answer may be tried again.
func Unsaved(err error) bool {
	return errors.Is(err, hub.ErrNotSaved) || errors.Is(err, hub.ErrUnreachable) || errors.Is(err, ErrUnsure)
}

// giveBack makes the capability name, taken for an answer that was not
// saved, good again: in cluster mode by forgetting its claim, which may
// fail as the save did (the capability is then used up, as before).
func (s *Store) giveBack(name string, c *Cap) {
	if s.shared != nil {
		s.shared.release(name)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byCap[name]; !ok {
		s.byCap[name] = c
	}
}

// peek is the capability named, still good, left as it is.
func (s *Store) peek(name string, now time.Time) (*Cap, error) {
	if s.shared != nil {
		c, _, err := s.shared.open(name, now)
		return c, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.byCap[name]
	if c == nil || now.After(c.Expires) {
		return nil, ErrVoid
	}
	cp := *c
	return &cp, nil
}

// maxAnswer bounds an answer's text and its request.
const maxAnswer = 4 << 10

// Answer answers the question of a capability (no token: the capability
// is the credential, good once): 200 {"ok": true}; 410 when the
// capability is unknown, used or void (the question was settled); 409
// when the question is no longer pending; 400 when the question does not
// take that answer (not one of its options), or the capability does not
// offer it (Cap.Answers), the capability kept. failed is told of every
// unknown capability, to slow down guessing (the server's limiter).
func (s *Store) Answer(h *hub.Hub, now func() time.Time, log *slog.Logger, failed func(*http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Cap  string `json:"cap"`
			Text string `json:"text"`
		}
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAnswer+512))
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			writeError(w, http.StatusRequestEntityTooLarge, "the body is too large")
			return
		case err != nil:
			// Cut off at the body deadline, or broken off: send it again.
			writeError(w, http.StatusRequestTimeout, "the body did not arrive whole in time; send it again")
			return
		}
		// One meaning only: {"text":"Yes","Text":"No"} is refused, not
		// read as its last key.
		if err := strictjson.Unmarshal(b, &req); err != nil {
			writeError(w, http.StatusBadRequest, `the body must be {"cap": "...", "text": "..."}: `+err.Error())
			return
		}
		// As sent: a button's text is its option's label, which may
		// have spaces around it.
		text := req.Text
		if strings.TrimSpace(text) == "" || !utf8.ValidString(text) || len(text) > maxAnswer {
			writeError(w, http.StatusBadRequest, "text must be the answer, 1 to 4096 bytes")
			return
		}
		c, err := s.Use(r.Context(), h, req.Cap, text, now())
		switch {
		case errors.Is(err, ErrVoid):
			failed(r)
			writeError(w, http.StatusGone, "this button can no longer answer: the question was answered, withdrawn or timed out, or the answer was given already; open the app")
		case errors.Is(err, hub.ErrNotPending):
			writeError(w, http.StatusConflict, "the question is no longer pending")
		case errors.Is(err, hub.ErrNotAnOption), errors.Is(err, ErrNotOffered):
			writeError(w, http.StatusBadRequest, err.Error())
		case errors.Is(err, ErrUnsure):
			writeError(w, http.StatusServiceUnavailable, "the answer cannot be taken now; try again")
		case err != nil:
			writeError(w, http.StatusServiceUnavailable, "the answer cannot be saved now: "+err.Error())
		default:
			log.Info("request answered", "door", c.Door, "id", c.ID, "by", c.WhoID)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			_, _ = w.Write([]byte(`{"ok":true}` + "\n"))
		}
	})
}

func writeError(w http.ResponseWriter, code int, why string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": why})
}
