package hub

import (
	"testing"

	"github.com/agentassistant/agentassistant/internal/lockorder"
)

// Every test of the package checks the lock order (internal/lockorder).
func TestMain(m *testing.M) { lockorder.Main(m) }
