//go:build unix

package wsconn

import "syscall"

// inlineWrites: senders may write to the socket themselves (writeNow).
const inlineWrites = true

func sockWrite(fd uintptr, b []byte) (int, error) { return syscall.Write(int(fd), b) }
