package server

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowtoken/snowtoken/lease"
	"github.com/snowtoken/snowtoken/snowflakealg"
)

// leaseMetrics export the worker ID lease, read at each scrape:
//
//	snowtoken_worker_id                        gauge  the worker ID the replica holds
//	snowtoken_worker_lease_remaining_seconds   gauge  until the lease ends unless renewed; 0: lost
//	snowtoken_worker_lease_ttl_seconds         gauge  the lease's TTL (SNOWTOKEN_WORKER_LEASE_TTL)
//
// A renewal every TTL/3 keeps the time left between 2/3 of the TTL and
// the TTL; below, renewals are failing.
type leaseMetrics struct {
	l                      *lease.Lease
	now                    func() time.Time
	worker, remaining, ttl *prometheus.Desc
}

func newLeaseMetrics(l *lease.Lease) *leaseMetrics {
	return &leaseMetrics{l: l, now: time.Now,
		worker: prometheus.NewDesc("snowtoken_worker_id",
			"The Snowflake worker ID this replica holds the lease of.", nil, nil),
		remaining: prometheus.NewDesc("snowtoken_worker_lease_remaining_seconds",
			"Time until the worker ID lease ends unless a renewal succeeds; 0 once lost (the replica issues no ID).", nil, nil),
		ttl: prometheus.NewDesc("snowtoken_worker_lease_ttl_seconds",
			"The worker ID lease's TTL (SNOWTOKEN_WORKER_LEASE_TTL); renewed every third of it.", nil, nil),
	}
}

func (m *leaseMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.worker
	ch <- m.remaining
	ch <- m.ttl
}

func (m *leaseMetrics) Collect(ch chan<- prometheus.Metric) {
	left := 0.0
	if exp := m.l.Expires(); !exp.IsZero() {
		left = max(0, exp.Sub(m.now()).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(m.worker, prometheus.GaugeValue, float64(m.l.WorkerID()))
	ch <- prometheus.MustNewConstMetric(m.remaining, prometheus.GaugeValue, left)
	ch <- prometheus.MustNewConstMetric(m.ttl, prometheus.GaugeValue, m.l.TTL().Seconds())
}

// The reasons of snowtoken_id_failures_total.
const (
	idFailLease     = "lease"           // the worker ID lease is lost, released, or waiting out a previous holder
	idFailRollback  = "clock_rollback"  // the clock is behind the last ID by more than the wait tier: 503 with Retry-After
	idFailUnhealthy = "clock_unhealthy" // behind by more than the fail-fast tier: the generator is unhealthy
	idFailOther     = "other"
)

// countedIDs is an ID generator whose failures to issue are counted by
// reason in snowtoken_id_failures_total; a request that ended (its
// context) is not a failure of the generator.
type countedIDs struct {
	*lease.Generator
	failures *prometheus.CounterVec
}

// countIDFailures wraps ids, registering its counter in reg with every
// reason at 0.
func countIDFailures(ids *lease.Generator, reg prometheus.Registerer) (*countedIDs, error) {
	c := &countedIDs{Generator: ids, failures: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "snowtoken_id_failures_total",
		Help: "IDs the generator could not issue, by reason: lease (no worker ID held), clock_rollback (the clock behind by more than the wait tier), clock_unhealthy (behind by more than the fail-fast tier), other.",
	}, []string{"reason"})}
	for _, r := range []string{idFailLease, idFailRollback, idFailUnhealthy, idFailOther} {
		c.failures.WithLabelValues(r)
	}
	return c, reg.Register(c.failures)
}

// NextID is the generator's, counting a failure by its reason.
func (c *countedIDs) NextID(ctx context.Context) (snowflakealg.ID, error) {
	id, err := c.Generator.NextID(ctx)
	if err != nil && ctx.Err() == nil {
		c.failures.WithLabelValues(idFailureReason(err)).Inc()
	}
	return id, err
}

func idFailureReason(err error) string {
	switch {
	case errors.Is(err, lease.ErrLost), errors.Is(err, lease.ErrReleased), errors.Is(err, lease.ErrSettling):
		return idFailLease
	case errors.Is(err, snowflakealg.ErrClockUnhealthy):
		return idFailUnhealthy
	case errors.Is(err, snowflakealg.ErrClockRollback):
		return idFailRollback
	default:
		return idFailOther
	}
}
