package main

import (
	"context"
	"fmt"
	"time"
)

// The memory step: the server's RSS with many idle connections, and after
// they leave, beside floors that hold the same connections.

// warmUp is how many connections come and go before a memory step's
// start is taken, in the server and in the socket floor alike.
const warmUp = 10

// idleMemory: server RSS with N logged-in idle /ws connections, and after
// they all leave.
func idleMemory(ctx context.Context, c config, r *report) error {
	prof, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	s, err := startServerWith(c, serverExtras{env: []string{"AGENTASSISTANT_PPROF=" + prof}})
	if err != nil {
		return err
	}
	defer s.stop()
	time.Sleep(time.Second)
	cold, err := s.rssKB()
	if err != nil {
		return err
	}
	// The start is a server that has served a device: a few connect, log
	// in and leave first. Before that, the code that serves them is not
	// yet paged in from the binary (1–1.5 MiB of file-backed RSS), which
	// is no memory a crowd leaves behind.
	few, err := dialMany(ctx, s, warmUp, nil)
	if err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	closeAll(few)
	time.Sleep(1500 * time.Millisecond)
	rss0, err := s.rssKB()
	if err != nil {
		return err
	}
	mem0, err := readMemory(ctx, prof)
	if err != nil {
		return err
	}
	conns, err := dialMany(ctx, s, c.idle, nil)
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	rss1, _ := s.rssKB()
	per := float64(rss1-rss0) * 1024 / float64(c.idle) / 1024
	r.add("idle: server RSS at start", float64(rss0)/1024, "MiB").Note =
		fmt.Sprintf("after %d devices came and left; %.1f MiB before any", warmUp, float64(cold)/1024)
	r.add(fmt.Sprintf("idle: server RSS with %d connections", c.idle), float64(rss1)/1024, "MiB")
	r.add(fmt.Sprintf("idle: RSS per connection (%d connections)", c.idle), per, "KiB").target("≤ 16 KiB", per <= 16)
	closeAll(conns)
	var rss2 int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		rss2, _ = s.rssKB()
		if h, err := s.health(ctx); err == nil && h.WS == 0 && float64(rss2) <= 1.2*float64(rss0) {
			break
		}
	}
	back := float64(rss2) / float64(rss0)
	res := r.add("idle: RSS after they all left, vs start", back, "×")
	res.target("≤ 1.5×", back <= 1.5)
	res.Note = fmt.Sprintf("%.1f MiB after leaving; %.2f× the RSS before any device came", float64(rss2)/1024, float64(rss2)/float64(cold))
	gorilla, err := idleFloor(ctx, c.idle)
	if err != nil {
		return fmt.Errorf("idle floor: %w", err)
	}
	gorilla.report(r, "bare gorilla server", c.idle)
	sockets, err := socketFloor(ctx, c.idle)
	if err != nil {
		return fmt.Errorf("socket floor: %w", err)
	}
	sockets.report(r, "Go sockets alone, accepted and held", c.idle)
	r.add("idle: RSS kept above the start after they all left", float64(rss2-rss0)/1024, "MiB")
	mem2, err := readMemory(ctx, prof)
	if err != nil {
		return err
	}
	mib := func(b uint64) float64 { return float64(b) / (1 << 20) }
	r.add("idle: after leaving, Go heap objects", mib(mem2.objects), "MiB").Note =
		fmt.Sprintf("%.1f MiB at start", mib(mem0.objects))
	r.add("idle: after leaving, heap free but not yet returned", mib(mem2.idle), "MiB").Note =
		fmt.Sprintf("%.1f MiB at start", mib(mem0.idle))
	r.add("idle: after leaving, the runtime's own memory", mib(mem2.runtime), "MiB").Note =
		fmt.Sprintf("%.1f MiB at start (stacks, span and GC metadata, poll descriptors)", mib(mem0.runtime))
	return nil
}
