//go:build windows

package main

import (
	"testing"

	"golang.org/x/sys/windows"
)

// TestWinsockErrnos: the errnos listenTrouble knows Windows by are
// Winsock's.
func TestWinsockErrnos(t *testing.T) {
	if wsaeAddrInUse != windows.WSAEADDRINUSE || wsaeAddrNotAvail != windows.WSAEADDRNOTAVAIL {
		t.Errorf("%d, %d; Winsock's are %d, %d", wsaeAddrInUse, wsaeAddrNotAvail, windows.WSAEADDRINUSE, windows.WSAEADDRNOTAVAIL)
	}
}
