//go:build !windows

package main

// runAsService is for Windows: elsewhere the service manager runs the
// server as any other command (SIGTERM stops it).
func runAsService() bool { return false }
