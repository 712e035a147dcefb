package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"
)

// runSocketHolder is the floor under the idle-memory figures: a process
// that only accepts TCP connections through Go's net package and holds
// them, without reading, goroutines or buffers, until a line on stdin
// tells it to close them all and give memory back. What it keeps after
// that is what any Go server keeps for having had those sockets.
func runSocketHolder() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	fmt.Println(ln.Addr().String())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		mu.Lock()
		for _, c := range held {
			_ = c.Close()
		}
		held = nil
		mu.Unlock()
		debug.FreeOSMemory()
		fmt.Println("closed")
	}
	return nil
}

// socketFloor starts a socket holder, connects n clients, and returns its
// memory around them. Its start is taken as the server's is: after a few
// connections came and went (warmUp).
func socketFloor(ctx context.Context, n int) (m memFloor, err error) {
	proc, err := startChild(ctx, nil, "-hold-sockets")
	if err != nil {
		return m, err
	}
	defer proc.stop()
	time.Sleep(time.Second)
	pid := proc.cmd.Process.Pid
	hold := func(n int) (func() error, error) {
		conns := make([]net.Conn, 0, n)
		release := func() error {
			for _, c := range conns {
				_ = c.Close()
			}
			conns = conns[:0]
			if _, err := fmt.Fprintln(proc.in, "close"); err != nil {
				return err
			}
			_, err := proc.out.ReadString('\n')
			return err
		}
		var d net.Dialer
		for range n {
			c, err := d.DialContext(ctx, "tcp", proc.addr)
			if err != nil {
				_ = release()
				return nil, err
			}
			conns = append(conns, c)
		}
		return release, nil
	}
	release, err := hold(warmUp)
	if err != nil {
		return m, err
	}
	time.Sleep(500 * time.Millisecond)
	if err := release(); err != nil {
		return m, err
	}
	time.Sleep(time.Second)
	rss0, err := rssKB(pid)
	if err != nil {
		return m, err
	}
	if release, err = hold(n); err != nil {
		return m, err
	}
	time.Sleep(2 * time.Second)
	rss1, _ := rssKB(pid)
	if err := release(); err != nil {
		return m, err
	}
	rss2, _ := rssKB(pid)
	return newMemFloor(n, rss0, rss1, rss2), nil
}
