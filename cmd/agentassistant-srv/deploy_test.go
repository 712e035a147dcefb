package main

import (
	"os"
	"testing"
)

// TestComposeConfig: the compose cluster's config file names only
// settings the server has, under their current names.
func TestComposeConfig(t *testing.T) {
	b, err := os.ReadFile("../../deploy/compose/agentassistant-srv.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, fs, err := loadConfig(t, string(b))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster.NATSURL == "" || cfg.Cluster.Replicas != 3 {
		t.Errorf("config = %+v", cfg)
	}
	if len(fs.Moved()) != 0 {
		t.Errorf("old keys: %v", fs.Moved())
	}
}
