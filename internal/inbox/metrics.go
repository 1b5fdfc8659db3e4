package inbox

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the inbox's Prometheus counters, labelled by source (and
// signature failures by SignatureReason too). Label values come from the
// configured sources and the fixed reasons only (a request for an unknown
// source is counted nowhere), so their number stays bounded whatever
// callers send.
type Metrics struct {
	received, duplicates, stale, held, failures, parked, signatureFailures *prometheus.CounterVec
}

// NewMetrics creates the counters and registers them with reg (nil: not
// registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "switchyard", Subsystem: "inbox", Name: name, Help: help,
		}, []string{"source"})
	}
	m := &Metrics{
		received:   counter("received_total", "Events with a valid signature and payload, duplicates included."),
		duplicates: counter("duplicates_total", "Deliveries of an event already recorded: the handler was not called."),
		stale:      counter("stale_total", "Events older than their entity's applied version: recorded, not applied."),
		held:       counter("held_total", "Events held until their predecessor is applied (out-of-order policy hold)."),
		failures:   counter("failures_total", "Failed handler attempts (errors and panics), rolled back and recorded."),
		parked:     counter("parked_total", "Events parked after their last allowed attempt failed."),
		signatureFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "switchyard", Subsystem: "inbox", Name: "signature_failures_total",
			Help: "Requests refused for their signature, by reason: missing_header, bad_format, timestamp_skew or no_match.",
		}, []string{"source", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.received, m.duplicates, m.stale, m.held, m.failures, m.parked, m.signatureFailures)
	}
	return m
}

// init creates a source's series at zero, so that dashboards see them
// before the first event.
func (m *Metrics) init(source string) {
	for _, c := range []*prometheus.CounterVec{m.received, m.duplicates, m.stale, m.held, m.failures, m.parked} {
		c.WithLabelValues(source)
	}
	for _, reason := range signatureReasons {
		m.signatureFailures.WithLabelValues(source, string(reason))
	}
}

// count records what Receive did with an event of source.
func (m *Metrics) count(source string, res Result) {
	m.received.WithLabelValues(source).Inc()
	switch res.Outcome {
	case OutcomeDuplicate:
		m.duplicates.WithLabelValues(source).Inc()
	case OutcomeStale:
		m.stale.WithLabelValues(source).Inc()
	case OutcomeHeld:
		m.held.WithLabelValues(source).Inc()
	case OutcomeFailed:
		m.failures.WithLabelValues(source).Inc()
	case OutcomeParked:
		m.failures.WithLabelValues(source).Inc()
		m.parked.WithLabelValues(source).Inc()
	}
}
