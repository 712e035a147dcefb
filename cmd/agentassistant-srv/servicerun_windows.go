package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/kardianos/service"
)

// runAsService runs the server under the Windows service manager when it
// started the process, and reports whether it did: a Windows service must
// answer the manager's start and stop requests, which an ordinary run
// does not.
func runAsService() bool {
	if service.Interactive() {
		return false
	}
	p := &program{args: os.Args[1:], done: make(chan error, 1)}
	s, err := service.New(p, &service.Config{Name: serviceName})
	if err == nil {
		err = s.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentassistant-srv:", err)
		os.Exit(1)
	}
	return true
}

// program is the server as the service manager starts and stops it; it
// owns the goroutine running the server.
type program struct {
	args   []string
	cancel context.CancelFunc
	done   chan error
}

func (p *program) Start(service.Service) error {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() {
		err := run(ctx, p.args, io.Discard, os.Stderr)
		if ctx.Err() == nil { // it stopped on its own: so does the service
			fmt.Fprintln(os.Stderr, "agentassistant-srv:", err)
			os.Exit(1)
		}
		p.done <- err
	}()
	return nil
}

func (p *program) Stop(service.Service) error {
	p.cancel()
	return <-p.done
}
