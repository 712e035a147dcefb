//go:build unix

package main

import (
	"fmt"
	"os"
	"syscall"
)

// startAfresh replaces this process by a new run of the same binary with
// the same arguments and environment: the same process to whatever
// supervises it (systemd, a container), a fresh server inside.
func startAfresh() error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start afresh: %w", err)
	}
	if err := syscall.Exec(self, os.Args, os.Environ()); err != nil { // #nosec G204 G702 -- this binary, its own arguments
		return fmt.Errorf("start afresh: %w", err)
	}
	return nil
}
