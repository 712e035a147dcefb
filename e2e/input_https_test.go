//go:build unix

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInputCompanionOverHTTPS: a server given -tls-cert (as docs/push.md
// has a phone's user start it) speaks only HTTPS; agentassistant-input,
// given -server https://HOST:PORT, logs in to it over wss as
// agentassistant-mcp reaches it.
func TestInputCompanionOverHTTPS(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	const tok = "input-https-token-0123456789"
	s := startServerWith(t, "0", t.TempDir(), []string{"-tls-cert", cert, "-tls-key", key}, tok)
	if !strings.HasPrefix(s.URL, "https://") {
		t.Fatalf("the server printed %s, not an https URL", s.URL)
	}

	// A stand-in for xdotool: the companion types nothing here, it only
	// has to log in.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "xdotool"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.Command(filepath.Join(binDir, "agentassistant-input"), "-listen", "-backend", "xdotool",
		"-server", "https://"+net.JoinHostPort(s.Host, s.Port), "-token", tok, "-nickname", "desk")
	cmd.Dir = home
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+cert, "PATH="+bin, "DISPLAY=:0", "WAYLAND_DISPLAY=", "HOME="+home, "XDG_CONFIG_HOME="+home)
	logs := &lockedWriter{b: &strings.Builder{}}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if strings.Contains(logs.String(), tok) {
			t.Errorf("the companion logged the token:\n%s", logs.String())
		}
	})
	if !logs.waitFor("listening: chat messages", 30*time.Second) {
		t.Fatalf("the companion did not log in over HTTPS; its log:\n%s", logs.String())
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key into dir.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}
