// Package natstest runs a real NATS server with JetStream inside a test
// process, for the cluster mode's tests: nothing to install.
package natstest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is a NATS server with JetStream, its data in a directory of the
// test's; Restart brings it back on the same port with the same data.
type Server struct {
	t        testing.TB
	dir      string
	port     int
	maxStore int64 // JetStream's file storage, 0 for NATS's default
	srv      *server.Server
}

// Start runs a server on a free loopback port; it is shut down when the
// test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartStore(t, 0)
}

// StartStore is Start with JetStream's file storage bounded to maxStore
// bytes (the server's max_file_store): a NATS short of storage.
func StartStore(t testing.TB, maxStore int64) *Server {
	t.Helper()
	s := &Server{t: t, dir: t.TempDir(), port: -1, maxStore: maxStore}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

func (s *Server) start() error {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: s.port, JetStream: true, StoreDir: s.dir,
		JetStreamMaxStore: s.maxStore, NoLog: true, NoSigs: true})
	if err != nil {
		return fmt.Errorf("new NATS server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("NATS server not ready")
	}
	s.srv = srv
	s.port = srv.Addr().(*net.TCPAddr).Port
	return nil
}

// URL is the server's client URL.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// Shutdown stops the server; Idempotent.
func (s *Server) Shutdown() {
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// Up starts a server stopped by Shutdown again, on its port, with its
// data: with Shutdown, an outage of the test's length.
func (s *Server) Up() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

// Restart stops the server and starts it again on its port, with its data.
func (s *Server) Restart() {
	s.t.Helper()
	s.Shutdown()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

// Wipe stops the server, deletes its storage and starts it again on its
// port: NATS back without its streams, as after a disk lost or a
// deployment that kept no volume.
func (s *Server) Wipe() {
	s.t.Helper()
	s.Shutdown()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}
