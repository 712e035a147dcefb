//go:build unix

package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// TestClusterStartsWhileANATSNodeIsDown: an instance starts while one of
// its three NATS nodes is down (a node restarting, a cluster still
// forming), so its buckets, three replicas each, cannot be placed yet.
// It waits for the node (saying so, when NATS says it cannot place them
// rather than leave its request unanswered) rather than stop; once the
// node is back it serves.
func TestClusterStartsWhileANATSNodeIsDown(t *testing.T) {
	ns := startNATSCluster(t, 3)
	ns.kill9(2)
	served := make(chan *server, 1)
	go func() {
		served <- startServerWith(t, "0", t.TempDir(), []string{"-nats-url", ns.URLs(), "-instance", "one"}, tokenA)
	}()
	// The instance is connected (and so has tried to make its buckets)
	// before the node comes back.
	for try := 0; !connectedAs(ns.nodes[0].mport, "agentassistant-srv one") && !connectedAs(ns.nodes[1].mport, "agentassistant-srv one"); try++ {
		if try == 3000 {
			t.Fatal("the instance never connected to NATS")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ns.start(2)
	if !ns.waitHealthy(2) {
		t.Fatal("NATS node n2 found its port taken when it started again")
	}
	var s *server
	select {
	case s = <-served:
	case <-time.After(60 * time.Second):
		t.Fatal("the instance never served")
	}
	if s == nil {
		t.FailNow() // startServerWith failed the test
	}
	resp, err := http.Get(s.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/health: %s", resp.Status)
	}
}

// connectedAs reports whether the NATS node whose monitoring port is
// mport has a client connection named name.
func connectedAs(mport, name string) bool {
	resp, err := http.Get("http://127.0.0.1:" + mport + "/connz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var cz struct {
		Connections []struct {
			Name string `json:"name"`
		} `json:"connections"`
	}
	if json.NewDecoder(resp.Body).Decode(&cz) != nil {
		return false
	}
	for _, c := range cz.Connections {
		if c.Name == name {
			return true
		}
	}
	return false
}
