package e2e

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// TestTracingExportsSpans runs the issuer with OTEL_EXPORTER_OTLP_ENDPOINT
// pointing at a stand-in collector and checks that the spans of a request
// reach it over OTLP/HTTP by the time the issuer has stopped.
func TestTracingExportsSpans(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" {
			mu.Lock()
			bodies = append(bodies, b)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	// The OpenTelemetry exporter reads its settings from the process
	// environment, as it does in production, where run's env is that one.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	env := devEnvVars()
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.URL

	p := startProgram(t, env)
	p.issueForm(t, p.dev, url.Values{"scope": {"read"}})
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	all := string(bytes.Join(bodies, nil))
	for _, want := range []string{"/token", "redis.store", "redis.batch", "snowtoken"} {
		if !strings.Contains(all, want) {
			t.Errorf("the collector got %d exports without %q", len(bodies), want)
		}
	}
	if !strings.Contains(p.logs(), `"msg":"tracing on (OTEL_* variables)"`) {
		t.Errorf("no log line says tracing is on:\n%s", p.logs())
	}
}
