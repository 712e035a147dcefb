//go:build !unix

package main

// startAfresh cannot replace the process here: it ends, and its service
// manager (or the person) starts it again.
func startAfresh() error { return errStartAfresh }
