package srv_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentassistant/agentassistant/srv"
	"github.com/agentassistant/agentassistant/srv/auth"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their files and a pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// serveTLS serves s over TLS (and so HTTP/2) as tls_cert does, on a
// port of its own until the test ends, and returns its address and a
// pool that trusts its certificate.
func serveTLS(t *testing.T, s *srv.Server) (addr string, pool *x509.CertPool) {
	t.Helper()
	hs := srv.NewHTTPServer(s.Handler(), srv.HTTPOptions{Idle: s.Idle(), ErrorLog: slog.New(slog.DiscardHandler)})
	certFile, keyFile, pool := selfSigned(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = hs.ServeTLS(ln, certFile, keyFile)
	}()
	t.Cleanup(func() {
		s.Close()
		_ = hs.Close()
		<-served
	})
	return ln.Addr().String(), pool
}

// TestIdleTLSFloodCannotLockTheOwnerOut: with TLS (and so HTTP/2), as
// tls_cert serves: connections that never finish their handshake and
// HTTP/2 connections idle after one public request are bounded like the
// others, and the owner's request gets through.
func TestIdleTLSFloodCannotLockTheOwnerOut(t *testing.T) {
	const perAddr = 16
	toks, err := auth.NewTokens(tokA, tokB)
	if err != nil {
		t.Fatal(err)
	}
	addr, pool := serveTLS(t, srv.New(srv.Options{Tokens: toks, Idle: srv.NewIdleConns(1000, perAddr), Limiter: auth.NewLimiter(1_000_000, time.Minute)}))
	client := func() *http.Client {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}

	var flood []net.Conn
	for range 2 * perAddr { // no handshake
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		flood = append(flood, c)
	}
	for range 2 * perAddr { // HTTP/2, idle after a public request
		resp, err := client().Get("https://" + addr + "/favicon.ico")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("the flood speaks %s, want HTTP/2", resp.Proto)
		}
	}
	resp, err := client().Get("https://" + addr + "/health?token=" + tokA)
	if err != nil {
		t.Fatalf("the owner's /health: %v", err)
	}
	defer resp.Body.Close()
	var h struct {
		Idle srv.IdleStats `json:"idleConnections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the owner's /health: %s %v", resp.Status, err)
	}
	if st := h.Idle; st.Peak > perAddr || st.Evicted < 3*perAddr {
		t.Errorf("waiting connections: %+v", st)
	}
	for i, c := range flood {
		if !closedByServer(c) {
			t.Fatalf("handshake-less connection %d still open", i)
		}
	}
}
