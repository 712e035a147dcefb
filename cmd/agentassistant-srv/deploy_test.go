package main

import (
	"testing"

	"github.com/agentassistant/agentassistant/internal/config"
)

// TestComposeConfig: the compose cluster's config file names only
// settings the server has.
func TestComposeConfig(t *testing.T) {
	var cfg fileConfig
	if err := config.Load("../../deploy/compose/agentassistant-srv.toml", &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.NATSURL == "" || cfg.NATSReplicas != 3 {
		t.Errorf("config = %+v", cfg)
	}
}
