package cluster

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestOpenWithoutJetStreamSaysHow: a NATS server started without
// JetStream (nats-server without -js, its default) answers every bucket
// "jetstream not enabled". A NATS server still starting may say so for
// a moment too, so the instance tries again; but what it logs meanwhile,
// and the error it stops with, say what to check: -js.
func TestOpenWithoutJetStreamSaysHow(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10e9) {
		t.Fatal("NATS is not ready")
	}
	var logs syncBuffer
	wrote := make(chan struct{}, 1)
	log := slog.New(slog.NewTextHandler(writeFunc(func(p []byte) (int, error) {
		n, err := logs.Write(p)
		select {
		case wrote <- struct{}{}:
		default:
		}
		return n, err
	}), nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		c, err := Open(ctx, Options{URL: ns.ClientURL(), Logger: log})
		if c != nil {
			c.Close()
		}
		done <- err
	}()
	// Once it has said it tries again, it is stopped, as a person would.
	for !strings.Contains(logs.String(), "trying again") {
		select {
		case err := <-done:
			t.Fatalf("Open returned before trying again: %v\n%s", err, logs.String())
		case <-wrote:
		}
	}
	cancel()
	err = <-done
	if err == nil {
		t.Fatal("Open passed without JetStream")
	}
	if !strings.Contains(err.Error(), "-js") {
		t.Errorf("the error does not say to start NATS with -js: %v", err)
	}
	if !strings.Contains(logs.String(), "-js") {
		t.Errorf("the warning does not say to start NATS with -js:\n%s", logs.String())
	}
}

// writeFunc is an io.Writer of a function.
type writeFunc func([]byte) (int, error)

func (f writeFunc) Write(p []byte) (int, error) { return f(p) }
