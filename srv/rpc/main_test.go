package rpc

import (
	"testing"

	"github.com/agentassistant/agentassistant/internal/lockorder"
)

// Every test of the package checks the lock order (internal/lockorder):
// the calls run through the hub's rooms and the auth package's caps.
func TestMain(m *testing.M) { lockorder.Main(m) }
