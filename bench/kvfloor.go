package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The cluster's floor: what JetStream alone costs an ask on this machine.
//
// A cluster's ask crosses JetStream twice: the question's record is
// created through the agent's instance and reaches the device's instance
// through its watch of the bucket, and the answer, written there by
// compare-and-set, reaches the agent's instance through its watch. The
// floor does exactly that between three bare processes (one asking, one
// answering, one only watching, as the cluster's third instance does),
// with the bucket's settings and the instances' GOMAXPROCS, on the same
// NATS server: no hub, no HTTP, no WebSocket, one-byte values. What the
// cluster's ask costs above one instance's is measured against it.

// kvFloorBucket is the floor's bucket, beside the cluster's.
const kvFloorBucket = "bench_floor"

// kvFloor runs the floor's n rounds (and n/10 unmeasured) against the
// NATS server at url and returns their p50 and p99 in µs.
func kvFloor(ctx context.Context, url string, n int) (p50, p99 float64, err error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return 0, 0, fmt.Errorf("connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, 0, fmt.Errorf("open JetStream: %w", err)
	}
	// As the requests bucket (srv/cluster): one value per key, on disk.
	if _, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: kvFloorBucket, History: 1,
		TTL: time.Hour, Storage: jetstream.FileStorage}); err != nil {
		return 0, 0, fmt.Errorf("open bucket %s: %w", kvFloorBucket, err)
	}
	var peers []*child
	defer func() {
		for _, p := range peers {
			p.stop()
		}
	}()
	for _, role := range []string{"watch", "answer", "ask"} {
		p, err := startKVPeer(ctx, url, role, n)
		if err != nil {
			return 0, 0, err
		}
		peers = append(peers, p)
	}
	line, err := peers[2].out.ReadString('\n') // the asker's figures, once done
	if err != nil {
		return 0, 0, fmt.Errorf("read the floor's figures: %w", err)
	}
	if _, err := fmt.Sscan(line, &p50, &p99); err != nil {
		return 0, 0, fmt.Errorf("read the floor's figures %q: %w", line, err)
	}
	return p50, p99, nil
}

// startKVPeer starts this binary as a floor peer and waits until it
// watches the bucket.
func startKVPeer(ctx context.Context, url, role string, n int) (*child, error) {
	env := append(serverProcs(), "AA_BENCH_NATS_URL="+url, "AA_BENCH_KV_ROUNDS="+strconv.Itoa(n))
	p, err := startChild(ctx, env, "-kv-peer", role)
	if err != nil {
		return nil, fmt.Errorf("floor peer %s did not start: %w", role, err)
	}
	if p.addr != "ready" {
		p.stop()
		return nil, fmt.Errorf("floor peer %s did not start: it said %q", role, p.addr)
	}
	return p, nil
}

// runKVPeer is a floor peer (-kv-peer): it watches the floor's bucket
// and says "ready"; "answer" writes "a" by compare-and-set over each "q"
// it hears; "ask" creates "q" under a new key, waits to hear its answer,
// n times after n/10 unmeasured, and prints the p50 and p99 in µs. It
// ends when its stdin closes.
func runKVPeer(role string) error {
	ctx := context.Background()
	n, err := strconv.Atoi(os.Getenv("AA_BENCH_KV_ROUNDS"))
	if err != nil {
		return fmt.Errorf("rounds: %w", err)
	}
	nc, err := nats.Connect(os.Getenv("AA_BENCH_NATS_URL"))
	if err != nil {
		return fmt.Errorf("connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("open JetStream: %w", err)
	}
	kv, err := js.KeyValue(ctx, kvFloorBucket)
	if err != nil {
		return fmt.Errorf("open bucket %s: %w", kvFloorBucket, err)
	}
	w, err := kv.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return fmt.Errorf("watch bucket %s: %w", kvFloorBucket, err)
	}
	defer func() { _ = w.Stop() }()
	fmt.Println("ready")
	quit := make(chan struct{})
	go func() { // stdin's end is the peer's
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(quit)
	}()
	switch role {
	case "watch":
		for {
			select {
			case _, ok := <-w.Updates():
				if !ok {
					return errors.New("watch: the watch ended")
				}
			case <-quit:
				return nil
			}
		}
	case "answer":
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return errors.New("answer: the watch ended")
				}
				if e != nil && string(e.Value()) == "q" {
					if _, err := kv.Update(ctx, e.Key(), []byte("a"), e.Revision()); err != nil {
						return fmt.Errorf("answer: %w", err)
					}
				}
			case <-quit:
				return nil
			}
		}
	case "ask":
		ds, err := timed(n, n/10, func(i int) error {
			k := "k" + strconv.Itoa(i)
			if _, err := kv.Create(ctx, k, []byte("q")); err != nil {
				return fmt.Errorf("ask: %w", err)
			}
			for e := range w.Updates() {
				if e != nil && e.Key() == k && string(e.Value()) == "a" {
					return nil
				}
			}
			return errors.New("ask: the watch ended")
		})
		if err != nil {
			return err
		}
		fmt.Println(pct(ds, 50), pct(ds, 99))
		<-quit
		return nil
	}
	return fmt.Errorf("no floor peer role %q", role)
}
