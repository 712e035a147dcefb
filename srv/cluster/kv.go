package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// What every bucket's user does alike: change one key by compare-and-set,
// follow a bucket's watch, read what a watch finds present.

// errKeepsChanging: a key changed under every one of a change's tries.
var errKeepsChanging = errors.New("it keeps changing")

// changeKey writes edit's value of key by compare-and-set on the revision
// read (made when there is none), reading it again when another write
// came first, at most tries times (0: until ctx ends). edit is given the
// value as stored and its revision (nil and 0: none), and says what to
// write, or false to write nothing. It reports whether it wrote.
func changeKey(ctx context.Context, kv jetstream.KeyValue, key string, tries int, edit func(old []byte, rev uint64) ([]byte, bool, error)) (bool, error) {
	for n := 0; tries == 0 || n < tries; n++ {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		var old []byte
		var rev uint64
		e, err := kv.Get(ctx, key)
		switch {
		case err == nil:
			old, rev = e.Value(), e.Revision()
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			return false, fmt.Errorf("read: %w", err)
		}
		next, write, err := edit(old, rev)
		if err != nil || !write {
			return false, err
		}
		if rev == 0 {
			_, err = kv.Create(ctx, key, next)
		} else {
			_, err = kv.Update(ctx, key, next, rev)
		}
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return false, fmt.Errorf("write: %w", err)
		}
		// Another write came first: read it, write over it.
	}
	return false, errKeepsChanging
}

// createOrTake makes key with value or, when it exists and stale says
// its entry may be taken over, writes value over that entry by
// compare-and-set: of several doing so at once, one does. It reports
// whether this call did.
func createOrTake(ctx context.Context, kv jetstream.KeyValue, key string, value []byte, stale func(jetstream.KeyValueEntry) bool) (bool, error) {
	_, err := kv.Create(ctx, key, value)
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, jetstream.ErrKeyExists):
		return false, err
	}
	e, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil // deleted meanwhile, by another that made it
	case err != nil:
		return false, err
	case !stale(e):
		return false, nil
	}
	_, err = kv.Update(ctx, key, value, e.Revision())
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists):
		return false, nil // another took it over first
	}
	return false, err
}

// follow hands each the changes w delivers, in order, until ctx ends or
// w does, and stops w; present is called once, when the values present
// at the start are all in.
func follow(ctx context.Context, w jetstream.KeyWatcher, present func(), each func(jetstream.KeyValueEntry)) {
	defer func() { _ = w.Stop() }()
	var once sync.Once
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return
			case e == nil:
				once.Do(present)
			default:
				each(e)
			}
		}
	}
}

// readPresent calls each with the latest value of every key of kv that
// filter matches, deleted ones left out, from one watch, stopping at the
// first error each returns; what names what is read, for the errors.
func readPresent(ctx context.Context, kv jetstream.KeyValue, filter, what string, each func(jetstream.KeyValueEntry) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("watch %s: %w", what, err)
	}
	defer func() {
		_ = w.Stop()
		// The watch's callback may be waiting to hand over an entry:
		// take what comes until the watch closes its channel.
		for {
			select {
			case _, ok := <-w.Updates():
				if !ok {
					return
				}
			case <-time.After(time.Second):
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("read %s: %w", what, ctx.Err())
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return fmt.Errorf("read %s: the watch ended", what)
			case e == nil: // every value present at the start was read
				return nil
			}
			if err := each(e); err != nil {
				return err
			}
		}
	}
}
