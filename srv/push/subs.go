package push

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/srv/datadir"
)

// Subscription is one device's Web Push subscription, as its browser's
// PushManager made it, and what the person chose for it.
type Subscription struct {
	ID       string `json:"id"`
	Endpoint string `json:"endpoint"`
	P256dh   string `json:"p256dh"`
	Auth     string `json:"auth"`
	// Device names it to the person ("Pixel 8 · Chrome").
	Device string `json:"device"`
	// Replies are the person's quick replies, the notification's actions
	// when the question offers no options.
	Replies []string  `json:"replies,omitempty"`
	Created time.Time `json:"created"`
}

// MaxSubscriptionsPerToken bounds a token's devices subscribed to push:
// each question is an HTTPS request to each.
const MaxSubscriptionsPerToken = 32

// ErrTooManySubscriptions: a new subscription past
// MaxSubscriptionsPerToken, refused.
var ErrTooManySubscriptions = errors.New("the token has the most push subscriptions it may")

// tooMany is what a device is told past the bound.
const tooMany = "this token has 32 devices subscribed to push, the most it may; turn push off on one first"

// Subscriptions keeps the devices' subscriptions by room (store.Room of
// the token: never the token itself).
type Subscriptions interface {
	List(room string) ([]Subscription, error)
	// Put adds s to room, or replaces the one with its endpoint. A store
	// shared by several processes (a cluster's) refuses a new endpoint
	// past MaxSubscriptionsPerToken with ErrTooManySubscriptions, the
	// look and the keeping one step across them.
	Put(room string, s Subscription) error
	// Remove drops room's subscriptions which holds for, as stored:
	// read and dropped in one step across processes, so that one
	// changed meanwhile by another (renewed at another endpoint) is
	// judged as it is now. False when none was dropped.
	Remove(room string, which func(Subscription) bool) (bool, error)
}

// ByID is Remove's which for the subscription id.
func ByID(id string) func(Subscription) bool {
	return func(s Subscription) bool { return s.ID == id }
}

// FileSubscriptions keeps the subscriptions in one file of the data
// directory, written whole (they are few: a person's devices).
type FileSubscriptions struct {
	path string
	mu   sync.Mutex // held alone
	all  map[string][]Subscription
}

// SubscriptionsFile is their file in the data directory.
const SubscriptionsFile = "push-subscriptions.json"

// OpenFileSubscriptions reads the subscriptions kept in dir.
func OpenFileSubscriptions(dir string) (*FileSubscriptions, error) {
	f := &FileSubscriptions{path: filepath.Join(dir, SubscriptionsFile), all: map[string][]Subscription{}}
	b, err := os.ReadFile(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return f, nil
	case err != nil:
		return nil, fmt.Errorf("read push subscriptions: %w", err)
	}
	if err := json.Unmarshal(b, &f.all); err != nil {
		return nil, fmt.Errorf("read %s: %w", f.path, err)
	}
	return f, nil
}

// List is room's subscriptions.
func (f *FileSubscriptions) List(room string) ([]Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.all[room]), nil
}

// Put keeps s in room, on disk before it returns.
func (f *FileSubscriptions) Put(room string, s Subscription) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	subs := slices.DeleteFunc(slices.Clone(f.all[room]), func(o Subscription) bool { return o.Endpoint == s.Endpoint || o.ID == s.ID })
	return f.save(room, append(subs, s))
}

// Remove drops room's subscriptions which holds for.
func (f *FileSubscriptions) Remove(room string, which func(Subscription) bool) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	subs := f.all[room]
	rest := slices.DeleteFunc(slices.Clone(subs), which)
	if len(rest) == len(subs) {
		return false, nil
	}
	return true, f.save(room, rest)
}

// save writes the file with room's subscriptions as subs. Called with
// f.mu held.
func (f *FileSubscriptions) save(room string, subs []Subscription) error {
	next := make(map[string][]Subscription, len(f.all)+1)
	maps.Copy(next, f.all)
	if len(subs) == 0 {
		delete(next, room)
	} else {
		next[room] = subs
	}
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if err := datadir.WriteFile(f.path, b); err != nil {
		return fmt.Errorf("keep push subscriptions: %w", err)
	}
	f.all = next
	return nil
}
