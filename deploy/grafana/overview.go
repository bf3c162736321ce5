package main

import "strconv"

// The SLOs' routes and thresholds, as docs/slo.md and
// deploy/prometheus/snowtoken-rules.yml have them.
const (
	issueRoute    = `route="/token"`
	validateRoute = `route=~"/token/validate|/token/introspect"`
	revokeRoutes  = `route=~"/token/revoke|/subjects/:subject/tokens|/clients/:client/tokens"`
)

// overview: issue and validation rate and latency by outcome and token
// format, the 4xx and 5xx ratios, and the SLOs with the error budget left
// over the range.
func overview() *board {
	b := newBoard("snowtoken-overview", "snowtoken / Overview",
		"Issue and validation: rates, latency, errors, and the SLOs of docs/slo.md with their error budget over the time range.")

	b.row("Traffic")
	b.graph("Issue rate by status", "POST /token answered, by HTTP status.", "reqps", 8,
		query{`sum by (status) (rate(snowtoken_http_requests_total{` + sel + `,` + issueRoute + `}[$__rate_interval]))`, "{{status}}"})
	b.graph("Validation rate by outcome and format", "Validations of GET /token/validate, by outcome and by the format of the token presented (jwt, opaque, none); POST /token/introspect is counted by status in the 4xx/5xx ratios.", "reqps", 8,
		query{`sum by (outcome, format) (rate(snowtoken_validations_total{` + sel + `}[$__rate_interval]))`, "{{format}} {{outcome}}"})
	b.graph("Tokens issued by format", "Tokens issued a second, by format (jwt, opaque).", "reqps", 8,
		query{`sum by (format) (rate(snowtoken_tokens_issued_total{` + sel + `}[$__rate_interval]))`, "{{format}}"})
	b.graph("Issue latency", "POST /token at the issuer: median and 99th percentile, by status.", "s", 12,
		query{`histogram_quantile(0.5, sum by (le, status) (rate(snowtoken_http_request_duration_seconds_bucket{` + sel + `,` + issueRoute + `}[$__rate_interval])))`, "p50 {{status}}"},
		query{`histogram_quantile(0.99, sum by (le, status) (rate(snowtoken_http_request_duration_seconds_bucket{` + sel + `,` + issueRoute + `}[$__rate_interval])))`, "p99 {{status}}"})
	b.graph("Validation latency", "Validations at the issuer: median and 99th percentile, by route and status.", "s", 12,
		query{`histogram_quantile(0.5, sum by (le, route, status) (rate(snowtoken_http_request_duration_seconds_bucket{` + sel + `,` + validateRoute + `}[$__rate_interval])))`, "p50 {{route}} {{status}}"},
		query{`histogram_quantile(0.99, sum by (le, route, status) (rate(snowtoken_http_request_duration_seconds_bucket{` + sel + `,` + validateRoute + `}[$__rate_interval])))`, "p99 {{route}} {{status}}"})
	b.graph("Issue time by format", "An issue inside the handler, from the client authenticated to the token stored (ID, signature, the Redis write): median and 99th percentile, by format.", "s", 12,
		query{`histogram_quantile(0.5, sum by (le, format) (rate(snowtoken_issue_duration_seconds_bucket{` + sel + `}[$__rate_interval])))`, "p50 {{format}}"},
		query{`histogram_quantile(0.99, sum by (le, format) (rate(snowtoken_issue_duration_seconds_bucket{` + sel + `}[$__rate_interval])))`, "p99 {{format}}"})
	b.graph("Validation decision time by format", "GET /token/validate's decision, from the token read to the answer chosen: median and 99th percentile, by the format presented.", "s", 12,
		query{`histogram_quantile(0.5, sum by (le, format) (rate(snowtoken_validation_duration_seconds_bucket{` + sel + `}[$__rate_interval])))`, "p50 {{format}}"},
		query{`histogram_quantile(0.99, sum by (le, format) (rate(snowtoken_validation_duration_seconds_bucket{` + sel + `}[$__rate_interval])))`, "p99 {{format}}"})
	b.graph("4xx ratio by route", "Share of each route's requests answered 4xx: the callers' mistakes (a wrong secret, a refused scope, a revoked token, the 429 of the failed-authentication limit).", "percentunit", 8,
		query{`sum by (route) (rate(snowtoken_http_requests_total{` + sel + `,status=~"4.."}[$__rate_interval])) / sum by (route) (rate(snowtoken_http_requests_total{` + sel + `}[$__rate_interval]))`, "{{route}}"})
	b.graph("5xx ratio by route", "Share of each route's requests answered 5xx: the issuer's failures, which the SLOs count.", "percentunit", 8,
		query{`sum by (route) (rate(snowtoken_http_requests_total{` + sel + `,status=~"5.."}[$__rate_interval])) / sum by (route) (rate(snowtoken_http_requests_total{` + sel + `}[$__rate_interval]))`, "{{route}}"})
	b.graph("503s by replica", "Requests answered 503 because Redis or the ID generator failed.", "reqps", 8,
		query{`sum by (instance) (rate(snowtoken_unavailable_total{` + sel + `}[$__rate_interval]))`, "{{instance}}"})

	b.row("SLOs over the time range")
	for _, slo := range []struct {
		name, bad, total string
		budget           float64 // the error budget, as a fraction
	}{
		{"Issue availability (99.9%)",
			`(sum(increase(snowtoken_http_requests_total{job="$job",` + issueRoute + `,status=~"5.."}[$__range])) or vector(0))`,
			`sum(increase(snowtoken_http_requests_total{job="$job",` + issueRoute + `}[$__range]))`, 0.001},
		{"Validation availability (99.95%)",
			`(sum(increase(snowtoken_http_requests_total{job="$job",` + validateRoute + `,status=~"5.."}[$__range])) or vector(0))`,
			`sum(increase(snowtoken_http_requests_total{job="$job",` + validateRoute + `}[$__range]))`, 0.0005},
		{"Issue latency: within 50 ms (99%)",
			`(sum(increase(snowtoken_http_request_duration_seconds_count{job="$job",` + issueRoute + `}[$__range])) - sum(increase(snowtoken_http_request_duration_seconds_bucket{job="$job",` + issueRoute + `,le="0.05"}[$__range])))`,
			`sum(increase(snowtoken_http_request_duration_seconds_count{job="$job",` + issueRoute + `}[$__range]))`, 0.01},
		{"Validation latency: within 10 ms (99%)",
			`(sum(increase(snowtoken_http_request_duration_seconds_count{job="$job",` + validateRoute + `}[$__range])) - sum(increase(snowtoken_http_request_duration_seconds_bucket{job="$job",` + validateRoute + `,le="0.01"}[$__range])))`,
			`sum(increase(snowtoken_http_request_duration_seconds_count{job="$job",` + validateRoute + `}[$__range]))`, 0.01},
	} {
		ratio := "(" + slo.bad + " / " + slo.total + ")"
		b.stat(slo.name, "Good events over the time range: the SLI of docs/slo.md.", "percentunit", 4,
			steps("red", 1-slo.budget, "green"), nil,
			query{"1 - " + ratio, ""})
		b.stat("Error budget left", "1: the budget unspent; 0: spent; below 0: the SLO missed over the time range.", "percentunit", 2,
			steps("red", 0.0, "orange", 0.25, "green"), nil,
			query{"1 - " + ratio + " / " + strconv.FormatFloat(slo.budget, 'g', -1, 64), ""})
	}
	b.graph("Burn rate, 1 h", "How fast each error budget burns (1: it lasts the 30 days exactly). The page fires above 14.4 over 1 h and 5 min, or above 6 over 6 h and 30 min (docs/alerts.md).", "short", 24,
		query{`snowtoken:issue_errors:ratio_rate1h{job="$job"} / 0.001`, "issue availability"},
		query{`snowtoken:validation_errors:ratio_rate1h{job="$job"} / 0.0005`, "validation availability"},
		query{`snowtoken:issue_slow:ratio_rate1h{job="$job"} / 0.01`, "issue latency"},
		query{`snowtoken:validation_slow:ratio_rate1h{job="$job"} / 0.01`, "validation latency"})
	return b
}
