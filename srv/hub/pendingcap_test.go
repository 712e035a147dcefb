package hub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentassistant/agentassistant/internal/wire"
)

// askText asks text under token as id and returns the call's error
// channel; the call waits until ctx ends or the request settles.
func askText(h *Hub, ctx context.Context, token, id, text string) chan error {
	ec := make(chan error, 1)
	go func() {
		_, err := h.Ask(ctx, token, Request{Kind: wire.AskQuestion, ID: id, Text: text, Timeout: time.Hour})
		ec <- err
	}()
	return ec
}

// TestPendingIsBounded: one token's agent asking without end (a loop, a
// leaked token) is refused past the room's bound on waiting requests, at
// once and saying why; the person's devices are not shown the refused
// one; another token asks as before; and once one is answered there is
// room again.
func TestPendingIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max = 4
		h := New(Options{MaxPending: max})
		defer h.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		phone := newFake("phone")
		h.Join("tok", phone, nil, Resume{})
		for i := range max {
			askText(h, ctx, "tok", fmt.Sprint("q", i), "Deploy?")
		}
		synctest.Wait()
		if got := len(pendingOf(h, "tok")); got != max {
			t.Fatalf("%d pending, want %d", got, max)
		}
		err := <-askText(h, ctx, "tok", "over", "Deploy?")
		if !errors.Is(err, ErrTooManyPending) {
			t.Fatalf("the request past the bound: %v, want ErrTooManyPending", err)
		}
		synctest.Wait()
		for _, n := range pendingOf(h, "tok") {
			if n.Request.ID == "over" {
				t.Error("the refused request is listed as pending")
			}
		}
		asked := 0
		for _, k := range phone.cmds() {
			if k == NoteAsked {
				asked++
			}
		}
		if asked != max {
			t.Errorf("the phone was shown %d requests, want %d", asked, max)
		}

		other := askText(h, ctx, "other", "o1", "Other token?")
		synctest.Wait()
		if got := len(pendingOf(h, "other")); got != 1 {
			t.Errorf("another token's request: %d pending, want 1", got)
		}
		select {
		case err := <-other:
			t.Errorf("another token's request ended: %v", err)
		default:
		}

		if err := h.Answer(context.Background(), "tok", wire.AskQuestion, "q0", Reply{ClientID: "phone"}); err != nil {
			t.Fatal(err)
		}
		askText(h, ctx, "tok", "again", "Deploy?")
		synctest.Wait()
		if got := len(pendingOf(h, "tok")); got != max {
			t.Errorf("after an answer: %d pending, want %d", got, max)
		}
	})
}

// TestPendingBytesBounded: the bound holds in bytes too, for a few long
// questions as for many short ones; a question that fits still goes.
func TestPendingBytesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(Options{MaxPendingBytes: 1000})
		defer h.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		askText(h, ctx, "tok", "long", strings.Repeat("a", 600))
		synctest.Wait()
		if err := <-askText(h, ctx, "tok", "longer", strings.Repeat("b", 600)); !errors.Is(err, ErrTooManyPending) {
			t.Fatalf("a question past the bytes: %v, want ErrTooManyPending", err)
		}
		short := askText(h, ctx, "tok", "short", strings.Repeat("c", 300))
		synctest.Wait()
		select {
		case err := <-short:
			t.Fatalf("a question within the bytes ended: %v", err)
		default:
		}
		if got := len(pendingOf(h, "tok")); got != 2 {
			t.Errorf("%d pending, want 2", got)
		}
	})
}

// TestPendingBoundUnderABurst: asks arriving all at once cannot overshoot
// the bound: it is checked and taken in one step.
func TestPendingBoundUnderABurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max, n = 8, 200
		h := New(Options{MaxPending: max})
		defer h.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errs := make([]chan error, n)
		for i := range n {
			errs[i] = askText(h, ctx, "tok", fmt.Sprint("b", i), "Deploy?")
		}
		synctest.Wait()
		refused := 0
		for _, ec := range errs {
			select {
			case err := <-ec:
				if !errors.Is(err, ErrTooManyPending) {
					t.Fatalf("an ask ended with %v", err)
				}
				refused++
			default:
			}
		}
		if got := len(pendingOf(h, "tok")); got != max || refused != n-max {
			t.Errorf("%d pending and %d refused, want %d and %d", got, refused, max, n-max)
		}
	})
}
