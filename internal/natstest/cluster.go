package natstest

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is n NATS servers with JetStream routed to each other as one
// JetStream cluster, inside the test process: what a deployment of three
// nodes does that one server does not (replicated buckets, a meta leader
// that places them), without processes to build or kill.
type Cluster struct {
	srvs []*server.Server
}

// StartCluster runs n servers on free loopback ports and returns once
// JetStream answers through them (its meta leader elected, every node
// current). They are shut down when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{}
	t.Cleanup(func() {
		for _, s := range c.srvs {
			s.Shutdown()
			s.WaitForShutdown()
		}
	})
	// A node is ready for connections once its routes are up: every
	// node is started before any is waited for, each told the others'
	// route ports, found free beforehand.
	routes := make([]string, n)
	for i := range routes {
		routes[i] = "nats://" + freeAddr(t)
	}
	for i := range n {
		o := &server.Options{ServerName: fmt.Sprint("n", i), Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
			NoLog: true, NoSigs: true, Routes: server.RoutesFromStr(strings.Join(slices.Delete(slices.Clone(routes), i, i+1), ","))}
		o.Cluster.Name, o.Cluster.Host = "test", "127.0.0.1"
		o.Cluster.Port, _ = strconv.Atoi(routes[i][strings.LastIndex(routes[i], ":")+1:])
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatalf("new NATS server: %v", err)
		}
		s.Start()
		c.srvs = append(c.srvs, s)
	}
	for i, s := range c.srvs {
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatalf("NATS server %d not ready", i)
		}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for !c.formed() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("the NATS cluster never elected its JetStream meta leader")
		}
	}
	return c
}

// freeAddr is a loopback address free now.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// formed: a meta leader is elected and every node is current with it.
func (c *Cluster) formed() bool {
	leader := false
	for _, s := range c.srvs {
		if !s.JetStreamIsCurrent() {
			return false
		}
		leader = leader || s.JetStreamIsLeader()
	}
	return leader
}

// URLs is the client URL of every node, comma-separated, as nats_url
// takes them.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.srvs))
	for i, s := range c.srvs {
		urls[i] = s.ClientURL()
	}
	return strings.Join(urls, ",")
}
