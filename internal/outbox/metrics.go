package outbox

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the dispatcher's Prometheus collectors.
type Metrics struct {
	outcomes        *prometheus.CounterVec
	staleFinalizes  *prometheus.CounterVec
	claimSeconds    prometheus.Histogram
	deliverySeconds *prometheus.HistogramVec
	breakerState    *prometheus.GaugeVec
}

// NewMetrics creates the collectors and registers them with reg (nil: not
// registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "switchyard", Subsystem: "outbox", Name: "outcomes_total",
			Help: "Applied delivery outcomes by destination: delivered, retry, dead, released.",
		}, []string{"destination", "outcome"}),
		staleFinalizes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "switchyard", Subsystem: "outbox", Name: "stale_finalizes_total",
			Help: "Outcomes not applied because the lease had been taken over (fencing).",
		}, []string{"destination"}),
		claimSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "switchyard", Subsystem: "outbox", Name: "claim_seconds",
			Help: "Time to claim one batch, waits for another worker's claim of the same kind included.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		deliverySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "switchyard", Subsystem: "outbox", Name: "delivery_seconds",
			Help: "Time of one delivery attempt by destination.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"destination"}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "switchyard", Subsystem: "outbox", Name: "breaker_state",
			Help: "Circuit breaker state by destination: 0 closed, 1 half-open, 2 open.",
		}, []string{"destination"}),
	}
	if reg != nil {
		reg.MustRegister(m.outcomes, m.staleFinalizes, m.claimSeconds, m.deliverySeconds, m.breakerState)
	}
	return m
}

// SetBreakerState records a destination's breaker state (guard.State's
// numeric value: 0 closed, 1 half-open, 2 open).
func (m *Metrics) SetBreakerState(destination string, state int) {
	m.breakerState.WithLabelValues(destination).Set(float64(state))
}
