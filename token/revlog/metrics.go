package revlog

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a Follower's:
//
//	snowtoken_revlog_heartbeat_age_seconds   gauge    since the read that brought the last heartbeat (-1: none since the last resync)
//	snowtoken_revlog_stale_seconds_total     counter  time not fresh (past Threshold), since start
//	snowtoken_revlog_resyncs_total{reason}   counter  full reads, by reason (Reason*)
//	snowtoken_revlog_entries_applied_total   counter  log entries applied, full reads included
type metrics struct {
	f       *Follower
	resyncs *prometheus.CounterVec
	applied prometheus.Counter
	// staleFrom is when the state went or goes stale (Threshold after the
	// last heartbeat, or a resync, or the start); stale the time stale
	// before it. Both under f.mu.
	staleFrom time.Time
	stale     time.Duration
}

// reasons are the Reason* constants: the resyncs metric has each from the
// start, at 0, so that an alert on one's rate works before its first resync.
var reasons = [...]string{ReasonStart, ReasonEpoch, ReasonUnapplied, ReasonTrimmed, ReasonError, ReasonQuiet, ReasonEntry, ReasonLoss, ReasonBacklog}

func newMetrics(f *Follower) *metrics {
	m := &metrics{f: f, staleFrom: f.opts.Now(),
		resyncs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "snowtoken_revlog_resyncs_total",
			Help: "Full reads of the revocation log, by reason."}, []string{"reason"}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{Name: "snowtoken_revlog_entries_applied_total",
			Help: "Revocation log entries applied."}),
	}
	for _, r := range reasons {
		m.resyncs.WithLabelValues(r)
	}
	return m
}

// accepted counts the time stale up to now, when a heartbeat brought by a
// read sent at sent is accepted: fresh until sent + Threshold. Under f.mu.
func (m *metrics) accepted(sent, now time.Time) {
	if now.After(m.staleFrom) {
		m.stale += now.Sub(m.staleFrom)
	}
	m.staleFrom = sent.Add(m.f.opts.Threshold)
}

// resynced ends the fresh spell at now. Under f.mu.
func (m *metrics) resynced(now time.Time) {
	if now.Before(m.staleFrom) {
		m.staleFrom = now
	}
}

// staleSeconds is the time stale so far, the current spell included.
func (m *metrics) staleSeconds() float64 {
	m.f.mu.RLock()
	defer m.f.mu.RUnlock()
	d := m.stale
	if now := m.f.opts.Now(); now.After(m.staleFrom) {
		d += now.Sub(m.staleFrom)
	}
	return d.Seconds()
}

func (m *metrics) heartbeatAge() float64 {
	at := m.f.lastHeartbeat()
	if at.IsZero() {
		return -1
	}
	return m.f.opts.Now().Sub(at).Seconds()
}

func (m *metrics) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.resyncs, m.applied,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "snowtoken_revlog_heartbeat_age_seconds",
			Help: "Time since the read that brought the last heartbeat; -1: none since the last resync."}, m.heartbeatAge),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "snowtoken_revlog_stale_seconds_total",
			Help: "Time the follower's state was not fresh."}, m.staleSeconds),
	} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
