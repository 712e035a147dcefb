//go:build unix

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A NATS cluster of real nats-server processes (built once from the
// module this tree requires), each with JetStream and its own storage:
// what a deployment runs, and what a test can kill -9, pause, or start
// again with its storage wiped.

var (
	natsBinOnce sync.Once
	natsBin     string
	natsBinErr  error
)

// natsServerBin builds nats-server into the test's binary directory.
func natsServerBin(t *testing.T) string {
	t.Helper()
	natsBinOnce.Do(func() {
		out := filepath.Join(binDir, "nats-server")
		build := exec.Command("go", "build", "-o", out, "github.com/nats-io/nats-server/v2")
		build.Stderr = os.Stderr
		if natsBinErr = build.Run(); natsBinErr == nil {
			natsBin = out
		}
	})
	if natsBinErr != nil {
		t.Fatalf("build nats-server: %v", natsBinErr)
	}
	return natsBin
}

type natsNode struct {
	name               string
	port, cport, mport string
	dir                string
	cmd                *exec.Cmd
	log                *lockedWriter
}

type natsCluster struct {
	t     *testing.T
	bin   string
	nodes []*natsNode
}

// startNATSCluster runs n nats-server processes routed to each other as
// one JetStream cluster and waits until each says it is healthy.
func startNATSCluster(t *testing.T, n int) *natsCluster {
	t.Helper()
	c := &natsCluster{t: t, bin: natsServerBin(t)}
	// A port found free may be taken by another process before its node
	// binds it (other tests run on this machine): then every node starts
	// again on other ports, the routes naming them.
	for try := 0; ; try++ {
		c.nodes = nil
		for i := range n {
			c.nodes = append(c.nodes, &natsNode{name: fmt.Sprint("n", i), port: freePort(t), cport: freePort(t), mport: freePort(t), dir: t.TempDir()})
		}
		for i := range c.nodes {
			c.start(i)
		}
		bound := true
		for i := range c.nodes {
			bound = bound && c.waitHealthy(i)
		}
		if bound {
			break
		}
		for i := range c.nodes {
			c.kill9(i)
		}
		if try == 2 {
			t.Fatal("NATS nodes found their ports taken three times")
		}
	}
	c.waitMeta()
	t.Cleanup(func() {
		for i, nd := range c.nodes {
			if nd.cmd != nil {
				_ = nd.cmd.Process.Signal(syscall.SIGCONT)
				c.kill9(i)
			}
		}
	})
	return c
}

// URLs is the -nats-url of every node.
func (c *natsCluster) URLs() string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, "nats://127.0.0.1:"+nd.port)
	}
	return strings.Join(out, ",")
}

// start runs node i (again), on its ports, with its storage.
func (c *natsCluster) start(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	var routes []string
	for j, o := range c.nodes {
		if j != i {
			routes = append(routes, "nats://127.0.0.1:"+o.cport)
		}
	}
	cmd := exec.Command(c.bin, "-a", "127.0.0.1", "-p", nd.port, "-m", nd.mport, "-n", nd.name, "-js", "-sd", nd.dir,
		// no_advertise: a client keeps to the URLs it was given, so a
		// link cut by a proxy stays cut (no reconnect around it)
		"--cluster_name", "aa", "--no_advertise", "-cluster", "nats://127.0.0.1:"+nd.cport, "-routes", strings.Join(routes, ","))
	var b strings.Builder
	nd.log = &lockedWriter{b: &b}
	cmd.Stdout, cmd.Stderr = nd.log, nd.log
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	nd.cmd = cmd
}

// waitHealthy waits until node i's /healthz says JetStream is current,
// or reports false when the node could not bind one of its ports.
func (c *natsCluster) waitHealthy(i int) bool {
	c.t.Helper()
	nd := c.nodes[i]
	for try := 0; ; try++ {
		resp, err := http.Get("http://127.0.0.1:" + nd.mport + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		if strings.Contains(nd.log.String(), "address already in use") {
			return false
		}
		if try == 600 {
			c.t.Fatalf("NATS node %s never healthy: %v; log:\n%s", nd.name, err, nd.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitMeta waits until JetStream answers through the cluster (its meta
// leader elected): until then an instance cannot make its buckets.
func (c *natsCluster) waitMeta() {
	c.t.Helper()
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		c.t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if try == 100 {
			c.t.Fatalf("JetStream never answered through the NATS cluster: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill9 kills node i without a word.
func (c *natsCluster) kill9(i int) {
	nd := c.nodes[i]
	if nd.cmd == nil {
		return
	}
	_ = nd.cmd.Process.Signal(syscall.SIGKILL)
	_ = nd.cmd.Wait()
	nd.cmd = nil
}

// wipe kills every node, deletes their storage and starts them again.
func (c *natsCluster) wipe() {
	c.t.Helper()
	for i, nd := range c.nodes {
		c.kill9(i)
		if err := os.RemoveAll(nd.dir); err != nil {
			c.t.Fatal(err)
		}
		if err := os.MkdirAll(nd.dir, 0o700); err != nil {
			c.t.Fatal(err)
		}
	}
	for i := range c.nodes {
		c.start(i)
	}
}
