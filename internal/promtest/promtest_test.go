package promtest

import (
	"slices"
	"testing"
)

// TestMetricNames: the extraction CheckQueries relies on to find a renamed
// metric.
func TestMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (le) (rate(snowtoken_http_request_duration_seconds_bucket{route="/token",le="0.05"}[5m]))`: {"snowtoken_http_request_duration_seconds_bucket"},
		`snowtoken_redis_memory_used_bytes / (snowtoken_redis_memory_max_bytes > 0) > 0.9`:                 {"snowtoken_redis_memory_used_bytes", "snowtoken_redis_memory_max_bytes"},
		`(time() - a_seconds) > 83 * 86400 and on (job, instance) b{state="next"} == 0`:                    {"a_seconds", "b"},
		`snowtoken:issue_errors:ratio_rate1h > 14.4 * 0.001 or x offset 5m`:                                {"snowtoken:issue_errors:ratio_rate1h", "x"},
		`histogram_quantile(0.99, sum by (le, status) (rate(h_bucket{job="and or"}[1m]))) + 1e3`:           {"h_bucket"},
		`sort(min by (client_id) ((c{job="x"} - time()) / 86400))`:                                         {"c"},
		`(sum(increase(d{s=~"5.."}[5m])) or vector(0)) / sum without (x) (e)`:                              {"d", "e"},
		`{__name__="x"}`: nil,
	} {
		if got := MetricNames(expr); !slices.Equal(got, want) {
			t.Errorf("MetricNames(%s) = %q, want %q", expr, got, want)
		}
	}
}
