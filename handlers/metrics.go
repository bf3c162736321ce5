package handlers

import (
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/snowtoken/snowtoken/handlers/revfeed"
	"github.com/snowtoken/snowtoken/internal/authlimit"
	"github.com/snowtoken/snowtoken/token"
	"github.com/snowtoken/snowtoken/token/clients"
)

// metrics are the Prometheus series of the handlers, in Options.Registry.
type metrics struct {
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	issued      *prometheus.CounterVec
	validations *prometheus.CounterVec
	// validated times GET /token/validate's decision by token format,
	// from the token read to the answer chosen; issuedIn POST /token's by
	// the format issued, from the client authenticated to the token stored.
	validated *prometheus.HistogramVec
	issuedIn  *prometheus.HistogramVec
	// byFormat are validated's and issued's series, looked up once.
	byFormat    [len(tokenFormats)]formatSeries
	redisErrors prometheus.Counter
	// authFailures counts failed client authentications; rateLimited the
	// requests the failed-authentication limit refused, by key kind.
	authFailures prometheus.Counter
	rateLimited  *prometheus.CounterVec
	// clientKeys counts, by client, the assertions and JWT subject tokens
	// answered 503 because the key set they need could not be fetched: its
	// key server's failure, not Redis's (redisErrors).
	clientKeys *prometheus.CounterVec
	series     map[string]*byStatus // by route; read-only once serving
}

// newMetrics registers the handlers' series in reg. clients returns the
// clients in use, read at every scrape.
func newMetrics(reg *prometheus.Registry, ids IDs, clients func() *clients.Registry) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowtoken_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "snowtoken_http_request_duration_seconds", Help: "HTTP request latency by route and status.",
			Buckets: []float64{.0001, .00025, .0005, .001, .002, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"route", "status"}),
		issued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowtoken_tokens_issued_total", Help: "Tokens issued, by format (jwt, opaque).",
		}, []string{"format"}),
		validations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowtoken_validations_total", Help: "Token validations by outcome and by the format of the token presented (jwt, opaque, none).",
		}, []string{"outcome", "format"}),
		validated: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "snowtoken_validation_duration_seconds", Help: "GET /token/validate's decision, from the token read to the answer chosen, by the format of the token presented.",
			Buckets: decisionBuckets,
		}, []string{"format"}),
		issuedIn: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "snowtoken_issue_duration_seconds", Help: "POST /token's issue, from the client authenticated to the token stored, by format.",
			Buckets: decisionBuckets,
		}, []string{"format"}),
		redisErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "snowtoken_unavailable_total", Help: "Requests answered 503 because Redis or the ID generator failed.",
		}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "snowtoken_auth_failures_total", Help: "Client authentications that failed: unknown client, wrong secret, disabled client.",
		}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowtoken_auth_rate_limited_total", Help: "Requests refused (429) by the failed-authentication limit, by the key that was limited (client or address).",
		}, []string{"limited_by"}),
		clientKeys: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowtoken_client_keys_unavailable_total",
			Help: "Client assertions and JWT subject tokens answered 503 because the key set they need could not be fetched (the client's jwks_uri, its workload issuer's keys, or a subject token issuer's), by client: the key server's failure, not Redis's.",
		}, []string{"client_id"}),
	}
	waits := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "snowtoken_id_generator_waits_total", Help: "ID requests that waited for a used-up millisecond.",
	}, func() float64 { return float64(ids.Stats().Waits) })
	rollbacks := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "snowtoken_id_clock_rollbacks_total", Help: "ID requests that found the clock behind the last issued ID.",
	}, func() float64 { return float64(ids.Stats().Rollbacks) })
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.issued, m.validations, m.validated, m.issuedIn, m.redisErrors, m.authFailures, m.rateLimited, m.clientKeys, waits, rollbacks,
		secretExpiry{clients},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// Every known label value at 0 from the start: an alert's rate works
	// before the first event, and a scrape shows every series.
	for i, f := range tokenFormats {
		for _, o := range ValidationOutcomes {
			m.validations.WithLabelValues(o, f)
		}
		m.byFormat[i] = formatSeries{validated: m.validated.WithLabelValues(f)}
		if f != formatNone {
			m.byFormat[i].issued = m.issued.WithLabelValues(f)
			m.byFormat[i].issuedIn = m.issuedIn.WithLabelValues(f)
		}
	}
	for _, by := range []string{authlimit.Client, authlimit.Address} {
		m.rateLimited.WithLabelValues(by)
	}
	return m, nil
}

// decisionBuckets are the buckets of a decision's time inside the server:
// from a hot validation's microseconds to a Redis round trip's timeout.
var decisionBuckets = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1, 1}

// The format labels: a token's, or none when none was presented.
const formatNone = "none"

var tokenFormats = [...]string{token.FormatJWT, token.FormatOpaque, formatNone}

// formatSeries are the series of one format.
type formatSeries struct {
	issued              prometheus.Counter
	validated, issuedIn prometheus.Observer
}

// formatIndex is the index in tokenFormats of raw's format, by its shape
// alone: the format label of a token presented, whatever its fate.
func formatIndex(raw string) int {
	switch {
	case raw == "":
		return 2
	case strings.HasPrefix(raw, token.OpaquePrefix):
		return 1
	}
	return 0
}

// issue counts a token issued in the format f (token.FormatJWT or
// token.FormatOpaque), the issue having begun at start.
func (m *metrics) issue(f string, start time.Time) {
	i := 0
	if f == token.FormatOpaque {
		i = 1
	}
	m.byFormat[i].issued.Inc()
	m.byFormat[i].issuedIn.Observe(time.Since(start).Seconds())
}

// ValidationOutcomes are the outcome labels of
// snowtoken_validations_total, as Outcome names them.
var ValidationOutcomes = [...]string{"valid", "revoked", "dpop_refused", "invalid", "insufficient_scope", "unavailable", "bad_request"}

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

// Outcome names a verdict's answer, err (nil: valid), by one of
// ValidationOutcomes: the outcome label of snowtoken_validations_total and
// of a gateway's checks (package handlers/extauthz).
func Outcome(err error) string {
	switch {
	case err == nil:
		return "valid"
	case errors.Is(err, token.ErrRevoked):
		return "revoked"
	case errors.Is(err, ErrDPoPProof), errors.Is(err, ErrDPoPNonce), errors.Is(err, ErrDPoPBound):
		return "dpop_refused" // a bound token without its proof: a stolen token's sign
	case errors.Is(err, token.ErrInvalidToken), errors.Is(err, ErrNoToken):
		return "invalid"
	case errors.Is(err, token.ErrInsufficientScope):
		return "insufficient_scope"
	case errors.Is(err, token.ErrUnavailable):
		return "unavailable"
	}
	return "bad_request"
}

// validation counts one validation of raw by outcome and format, and times
// it from start.
func (m *metrics) validation(raw string, start time.Time, err error) {
	f := formatIndex(raw)
	m.byFormat[f].validated.Observe(time.Since(start).Seconds())
	outcome := Outcome(err)
	m.validations.WithLabelValues(outcome, tokenFormats[f]).Inc()
}

// knowClients starts snowtoken_client_keys_unavailable_total at 0 for
// every client of cs whose keys are fetched (jwks_uri, workload identity),
// so that an alert on its rate works before the first failure and a
// scrape shows the series. A client removed keeps its series, as any
// counter does until the process ends.
func (m *metrics) knowClients(cs *clients.Registry) {
	for _, c := range cs.All() {
		if c.JWKSURI != "" || c.WorkloadIdentity != nil {
			m.clientKeys.WithLabelValues(c.ID)
		}
	}
}

// secretExpiryDesc describes snowtoken_client_secret_expiry_timestamp_seconds.
//
// It is the time the secret expires, not the time left: a value that
// changes only when the clients do, which an alert turns into "expires
// within N days" with time() and its own N (Prometheus's advice for event
// times; a count of clients expiring within a fixed N would fix N here). It
// has one series a client whose current secret has a secret_expires, unless
// the client is disabled: the alert is for secrets that must be renewed. A
// previous secret's expiry is the planned end of a rotation, not a warning.
var secretExpiryDesc = prometheus.NewDesc("snowtoken_client_secret_expiry_timestamp_seconds",
	"When the client's current secret expires (secret_expires in the clients file), in Unix seconds; clients without an expiry or disabled have no series.",
	[]string{"client_id"}, nil)

// secretExpiry collects snowtoken_client_secret_expiry_timestamp_seconds
// from the clients in use at the time of the scrape.
type secretExpiry struct{ clients func() *clients.Registry }

func (secretExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- secretExpiryDesc }

func (e secretExpiry) Collect(ch chan<- prometheus.Metric) {
	for _, c := range e.clients().All() {
		if c.Disabled || c.SecretExpires.IsZero() {
			continue
		}
		ch <- prometheus.MustNewConstMetric(secretExpiryDesc, prometheus.GaugeValue, float64(c.SecretExpires.Unix()), c.ID)
	}
}

// registerFeed registers the revocation feed's series in reg:
//
//	snowtoken_revfeed_subscribers  gauge  streams of GET /revocations/events and waiting polls served now
func registerFeed(reg *prometheus.Registry, f *revfeed.Feed) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "snowtoken_revfeed_subscribers", Help: "Streams of GET /revocations/events and waiting polls of POST /revocations/poll served now.",
	}, func() float64 { return float64(f.Subscribers()) }))
}
