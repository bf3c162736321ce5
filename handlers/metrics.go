package handlers

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"snowtoken/token"
)

// metrics are the Prometheus series of the handlers, in Options.Registry.
type metrics struct {
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	issued      prometheus.Counter
	validations *prometheus.CounterVec
	redisErrors prometheus.Counter
	// authFailures counts failed client authentications; rateLimited the
	// requests the failed-authentication limit refused, by key kind.
	authFailures prometheus.Counter
	rateLimited  *prometheus.CounterVec
	series       map[string]*byStatus // by route; read-only once serving
}

func newMetrics(reg *prometheus.Registry, ids IDs) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowtoken_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "snowtoken_http_request_duration_seconds", Help: "HTTP request latency by route and status.",
			Buckets: []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"route", "status"}),
		issued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "snowtoken_tokens_issued_total", Help: "Tokens issued.",
		}),
		validations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowtoken_validations_total", Help: "Token validations by outcome.",
		}, []string{"outcome"}),
		redisErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "snowtoken_unavailable_total", Help: "Requests answered 503 because Redis or the ID generator failed.",
		}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "snowtoken_auth_failures_total", Help: "Client authentications that failed: unknown client, wrong secret, disabled client.",
		}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowtoken_auth_rate_limited_total", Help: "Requests refused (429) by the failed-authentication limit, by the key that was limited (client or address).",
		}, []string{"limited_by"}),
	}
	waits := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "snowtoken_id_generator_waits_total", Help: "ID requests that waited for a used-up millisecond.",
	}, func() float64 { return float64(ids.Stats().Waits) })
	rollbacks := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "snowtoken_id_clock_rollbacks_total", Help: "ID requests that found the clock behind the last issued ID.",
	}, func() float64 { return float64(ids.Stats().Rollbacks) })
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.issued, m.validations, m.redisErrors, m.authFailures, m.rateLimited, waits, rollbacks,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// middleware counts and times every request by route template and status.
func (m *metrics) middleware(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	s := m.seriesFor(route, c.Writer.Status())
	s.requests.Inc()
	s.latency.Observe(time.Since(start).Seconds())
}

// routeSeries are the request series of one route and status.
type routeSeries struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// byStatus holds a route's series by HTTP status, filled on first use.
type byStatus [600]atomic.Pointer[routeSeries]

// cacheRoutes makes the series of routes cheap to find: WithLabelValues
// hashes its labels on every call, seriesFor only indexes. Call it once,
// before serving.
func (m *metrics) cacheRoutes(routes gin.RoutesInfo) {
	m.series = map[string]*byStatus{"unmatched": new(byStatus)}
	for _, r := range routes {
		m.series[r.Path] = new(byStatus)
	}
}

func (m *metrics) seriesFor(route string, status int) *routeSeries {
	cached := m.series[route]
	if cached == nil || status < 0 || status >= len(cached) {
		return m.newSeries(route, status)
	}
	if s := cached[status].Load(); s != nil {
		return s
	}
	s := m.newSeries(route, status)
	cached[status].Store(s) // a racing Store holds the same series
	return s
}

func (m *metrics) newSeries(route string, status int) *routeSeries {
	code := strconv.Itoa(status)
	return &routeSeries{requests: m.requests.WithLabelValues(route, code), latency: m.latency.WithLabelValues(route, code)}
}

// validation counts one validation by outcome.
func (m *metrics) validation(err error) {
	outcome := "valid"
	switch {
	case err == nil:
	case errors.Is(err, token.ErrRevoked):
		outcome = "revoked"
	case errors.Is(err, token.ErrInvalidToken), errors.Is(err, ErrNoToken):
		outcome = "invalid"
	case errors.Is(err, token.ErrInsufficientScope):
		outcome = "insufficient_scope"
	case errors.Is(err, token.ErrUnavailable):
		outcome = "unavailable"
	default:
		outcome = "bad_request"
	}
	m.validations.WithLabelValues(outcome).Inc()
}
