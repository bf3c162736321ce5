package extauthz

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowtoken/snowtoken/handlers"
)

// outcomeAbandoned is the outcome of a call whose deadline passed, or that
// its caller cancelled, before it was answered.
const outcomeAbandoned = "abandoned"

// metrics are the series of the checks, beside GET /token/validate's
// (snowtoken_validations_total, whose outcome labels they share):
//
//	snowtoken_extauthz_checks_total{outcome}        checks by handlers.Outcome, or abandoned
//	snowtoken_extauthz_check_duration_seconds       a check, from its request read to its answer
type metrics struct {
	checks   *prometheus.CounterVec
	duration prometheus.Histogram
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowtoken_extauthz_checks_total",
			Help: "ext_authz Check calls by outcome (the outcomes of snowtoken_validations_total, and abandoned: a deadline passed or the gateway cancelled).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "snowtoken_extauthz_check_duration_seconds",
			Help:    "ext_authz Check calls, from the request read to the answer chosen.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
	}
	for _, o := range handlers.ValidationOutcomes {
		m.checks.WithLabelValues(o)
	}
	m.checks.WithLabelValues(outcomeAbandoned)
	for _, c := range []prometheus.Collector{m.checks, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// count counts one check by outcome and times it from start.
func (m *metrics) count(outcome string, start time.Time) {
	m.duration.Observe(time.Since(start).Seconds())
	m.checks.WithLabelValues(outcome).Inc()
}
