// Package metrics serves /metrics in the Prometheus text format: the
// requests asked, answered, withdrawn and timed out by door, how long a
// person took to answer, how long the store took to make a change
// durable, the connections of each door, the connections turned away
// before they showed the token, and the cluster's link to NATS.
//
// The request figures come from the hub's typed events (hub.Subscribe);
// the rest are read when scraped from the functions the server gives,
// the same ones /health reads. No label carries a token, a project or
// anything a person typed: the doors and kinds are fixed lists.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentassistant/agentassistant/srv/hub"
)

// Options say where the figures come from. Every field may be nil.
type Options struct {
	// Hub's events are counted.
	Hub *hub.Hub
	// Connections counts the open connections of each door ("ws",
	// "agent_ws", "ingress", "mcp_sessions"...).
	Connections map[string]func() int
	// PreAuth reports the connections refused, and evicted, before they
	// showed the token (auth.Pending.Turned).
	PreAuth func() (refused, evicted uint64)
	// NATS reports whether the cluster's store answers (a recent round
	// trip); nil in one process.
	NATS func() bool
	// ChannelsRefused counts the credentials each channel's service
	// refuses now, by channel name ("telegram", "slack"...): the names
	// are the config's fixed list.
	ChannelsRefused func() map[string]int
	// Channels are the names of the channels set.
	Channels []string
}

// Metrics is the registry behind /metrics. Close stops counting.
type Metrics struct {
	reg         *prometheus.Registry
	requests    *prometheus.CounterVec
	answerTime  *prometheus.HistogramVec
	storeWrites *prometheus.HistogramVec
	unsubscribe func()
}

// doors are the values of the door label; any other is "other", so a
// label never grows with what a client sends.
var doors = map[string]bool{"connect": true, "mcp": true, "ingress": true, "ws": true, "push": true, "ntfy": true, "webhook": true, "telegram": true}

func door(d string) string {
	if doors[d] {
		return d
	}
	return "other"
}

// New registers the figures and starts counting the hub's events.
func New(o Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentassistant_requests_total",
		Help: "Requests (questions and task reports) by what happened to them and the door it happened through: asked through a door, answered through a door, withdrawn or timed out (the door they were asked through).",
	}, []string{"event", "door"})
	m.answerTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentassistant_answer_seconds",
		Help:    "Time from a request being asked to its answer being saved.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600},
	}, []string{"kind"})
	m.storeWrites = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentassistant_store_write_seconds",
		Help:    "Time the store took to make a change durable: a new request, or an outcome (the journal in one process, NATS JetStream in a cluster).",
		Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
	}, []string{"what"})
	m.reg.MustRegister(m.requests, m.answerTime, m.storeWrites,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for d, count := range o.Connections {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "agentassistant_connections",
			Help:        "Open connections of each door.",
			ConstLabels: prometheus.Labels{"door": d},
		}, func() float64 { return float64(count()) }))
	}
	if o.PreAuth != nil {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "agentassistant_preauth_refused_total",
			Help: "WebSocket connections refused before they showed the token: too many were waiting to log in and none could be evicted.",
		}, func() float64 { r, _ := o.PreAuth(); return float64(r) }))
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "agentassistant_preauth_evicted_total",
			Help: "WebSocket connections that had not shown the token, closed to make room for a newcomer.",
		}, func() float64 { _, e := o.PreAuth(); return float64(e) }))
	}
	if o.NATS != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentassistant_nats_ok",
			Help: "1 while a round trip to NATS JetStream succeeds, else 0 (cluster mode).",
		}, func() float64 {
			if o.NATS() {
				return 1
			}
			return 0
		}))
	}
	for _, name := range o.Channels {
		if o.ChannelsRefused == nil {
			break
		}
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "agentassistant_channel_credentials_refused",
			Help:        "Credentials of the channel its service refuses now (a setting to fix: Telegram's bot_token, Slack's bot_token or app_token, ntfy's access_token, the e-mail logins); 0 while all are taken.",
			ConstLabels: prometheus.Labels{"channel": name},
		}, func() float64 { return float64(o.ChannelsRefused()[name]) }))
	}
	m.unsubscribe = func() {}
	if o.Hub != nil {
		m.unsubscribe = o.Hub.Subscribe(m.count)
	}
	return m
}

// count takes one of the hub's events; it only adds to counters.
func (m *Metrics) count(ev hub.Event) {
	if ev.Again {
		return // counted where it was asked
	}
	d, what := ev.Request.Door, "outcome"
	switch ev.Kind {
	case hub.Asked:
		what = "request"
	case hub.Answered:
		d = ev.Reply.Door
		m.answerTime.WithLabelValues(ev.Request.Kind.String()).Observe(ev.At.Sub(ev.AskedAt).Seconds())
	}
	m.requests.WithLabelValues(ev.Kind.String(), door(d)).Inc()
	m.storeWrites.WithLabelValues(what).Observe(ev.Saved.Seconds())
}

// Handler serves the figures in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Close stops counting the hub's events. Idempotent.
func (m *Metrics) Close() { m.unsubscribe() }
