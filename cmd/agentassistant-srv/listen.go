package main

import (
	"errors"
	"fmt"
	"syscall"
)

// listenError is err, a listen on listenAddr that failed, with what to
// do when the port is in use or host is no address of this machine.
func listenError(err error, listenAddr, host string) error {
	switch listenTrouble(err) {
	case portInUse:
		// Most often this very server, started twice (make run in a
		// second terminal, or a service already running).
		return fmt.Errorf("listen: %s is in use: if agentassistant-srv is already running, use that one (the URL it printed; agentassistant-mcp finds it); "+
			"else stop what holds the port, or pick another with -port or agentassistant_server_port and give agentassistant-mcp the same -port: %w", listenAddr, err)
	case hostNotHere:
		return fmt.Errorf("listen: %s is no address of this machine: give -host (or agentassistant_server_host) one of its addresses, or 0.0.0.0 for all of them: %w", host, err)
	}
	return fmt.Errorf("listen: %w", err)
}

// trouble is why a listen failed, as far as a hint goes.
type trouble int

const (
	otherTrouble trouble = iota
	portInUse
	hostNotHere
)

// Winsock's errnos for the same two troubles (winerror.h). A listen on
// Windows reports these; syscall.EADDRINUSE and EADDRNOTAVAIL are values
// of Go's own there, which no call returns. They are told apart on every
// system, no unix errno being near them, so that a test anywhere checks
// them; listen_windows_test.go holds them to golang.org/x/sys/windows'.
const (
	wsaeAddrInUse    syscall.Errno = 10048 // WSAEADDRINUSE
	wsaeAddrNotAvail syscall.Errno = 10049 // WSAEADDRNOTAVAIL
)

// listenTrouble says why a listen failed.
func listenTrouble(err error) trouble {
	switch {
	case errors.Is(err, syscall.EADDRINUSE), errors.Is(err, wsaeAddrInUse):
		return portInUse
	case errors.Is(err, syscall.EADDRNOTAVAIL), errors.Is(err, wsaeAddrNotAvail):
		return hostNotHere
	}
	return otherTrouble
}
