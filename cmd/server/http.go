package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/snowtoken/snowtoken/internal/tracing"
)

// newHTTPServer is an http.Server for h whose limits bound what a slow or
// hostile client can hold: the request header must arrive within 5 s and
// fit in 16 KiB, the whole request within 10 s, the answer is written
// within 10 s, and an idle keep-alive connection is closed after 120 s.
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// serveMetrics serves reg at GET /metrics on addr, a listener apart from
// the API's so that the public port does not serve the metrics, and with
// pprof (SNOWTOKEN_PPROF) Go's profiles at /debug/pprof/; it returns the
// address bound and a function that stops it. An empty addr
// (SNOWTOKEN_METRICS_ADDR=off) serves nothing.
func serveMetrics(addr string, pprof bool, reg *prometheus.Registry, log *slog.Logger) (string, func(), error) {
	if addr == "" {
		return "off", func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("SNOWTOKEN_METRICS_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if pprof {
		// net/http/pprof's init also registers these on
		// http.DefaultServeMux, which snowtoken never serves: they are
		// served here alone, and only when asked for.
		mux.HandleFunc("GET /debug/pprof/", httppprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", httppprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", httppprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", httppprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", httppprof.Trace)
	}
	srv := newHTTPServer(mux, log)
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "err", err)
		}
	}()
	return ln.Addr().String(), func() { srv.Close() }, nil
}

// startTracing starts OpenTelemetry tracing when the OTEL_* variables ask
// for it (package tracing), with go-redis's spans for the commands sent
// outside the store's pipelines (lease, rate limit, readiness). Off, it
// returns a nil provider and installs nothing. The returned stop flushes the
// spans still buffered, for at most 5 s.
func startTracing(ctx context.Context, env map[string]string, rdb redis.UniversalClient, log *slog.Logger) (trace.TracerProvider, func(), error) {
	tp, shutdown, err := tracing.Start(ctx, env, moduleVersion())
	if err != nil || tp == nil {
		return nil, func() {}, err
	}
	if err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(tp)); err != nil {
		return nil, nil, fmt.Errorf("tracing redis: %w", err)
	}
	log.Info("tracing on (OTEL_* variables)", "exporter", env["OTEL_TRACES_EXPORTER"],
		"endpoint", cmp.Or(env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"], env["OTEL_EXPORTER_OTLP_ENDPOINT"]))
	return tp, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("flushing traces failed", "err", err)
		}
	}, nil
}

// moduleVersion is the issuer's module version as the build recorded it
// ("(devel)" for a build from a checkout).
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.Main.Version
	}
	return ""
}
