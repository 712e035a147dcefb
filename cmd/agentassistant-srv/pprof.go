package main

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/agentassistant/agentassistant/srv/auth"
)

// servePprof serves the runtime profiles on addr (loopback only), for
// maintainers measuring the server: AGENTASSISTANT_PPROF=127.0.0.1:6060.
// /debug/memory gives where the process's memory is, by the runtime's
// memory classes, as JSON (bytes). It answers only the Host names guard
// allows, as the main port does, so a web page cannot read it through
// DNS rebinding.
func servePprof(addr string, guard *auth.Guard, log *slog.Logger) (stop func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if !isLoopback(host) {
		return nil, errors.New("AGENTASSISTANT_PPROF must be a loopback address")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/memory", memoryClasses)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: guard.Wrap(mux), ReadHeaderTimeout: 10 * time.Second}
	var served sync.WaitGroup // stop waits for the goroutine serving ln
	served.Go(func() { _ = hs.Serve(ln) })
	log.Warn("serving profiles", "addr", ln.Addr().String())
	return func() {
		_ = hs.Close()
		served.Wait()
	}, nil
}

// memoryClasses writes runtime/metrics' /memory/classes/ figures.
func memoryClasses(w http.ResponseWriter, _ *http.Request) {
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if strings.HasPrefix(d.Name, "/memory/classes/") && d.Kind == metrics.KindUint64 {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	out := make(map[string]uint64, len(samples))
	for _, s := range samples {
		out[s.Name] = s.Value.Uint64()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
