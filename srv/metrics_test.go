package srv_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/agentassistant/agentassistant/internal/wstest"
	"github.com/agentassistant/agentassistant/srv"
)

// TestMetrics: /metrics needs the token; with it, a question asked
// through /mcp and answered on /ws is counted by those doors, its answer
// time and store writes observed, the /ws connection counted, in the
// Prometheus text format (read by Prometheus's own parser); and nothing
// a person typed, nor the token, is in it.
func TestMetrics(t *testing.T) {
	_, base := newGuarded(t, srv.Options{})
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/metrics without the token: %d, want 401", resp.StatusCode)
	}

	phone := login(t, base, tokA, "phone")
	c := mcpClient(t, base, tokA, "")
	done := make(chan error, 1)
	go func() {
		_, err := callTool(context.Background(), c, "ask_question", map[string]any{"question": "Which port, secretly?", "project_directory": "/srv/app"}, nil)
		done <- err
	}()
	q := expect(t, phone, "AskQuestion")
	if err := phone.Send(wstest.TextReply(q.GetAskQuestionRequest().GetID(), "port 8080, quietly")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+tokA)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, body)
	}
	for _, secret := range []string{tokA, "secretly", "/srv/app", "quietly"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("/metrics shows %q", secret)
		}
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("not the Prometheus text format: %v", err)
	}
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		f := fams[name]
		if f == nil {
			t.Fatalf("no %s in /metrics", name)
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
		t.Fatalf("no %s%v in /metrics", name, labels)
		return 0
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"agentassistant_requests_total", map[string]string{"event": "asked", "door": "mcp"}, 1},
		{"agentassistant_requests_total", map[string]string{"event": "answered", "door": "ws"}, 1},
		{"agentassistant_answer_seconds", map[string]string{}, 1},
		{"agentassistant_store_write_seconds", map[string]string{"what": "request"}, 1},
		{"agentassistant_store_write_seconds", map[string]string{"what": "outcome"}, 1},
		{"agentassistant_connections", map[string]string{"door": "ws"}, 1},
		{"agentassistant_preauth_refused_total", nil, 0},
	} {
		if got := value(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}
