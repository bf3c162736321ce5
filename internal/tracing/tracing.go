// Package tracing turns on OpenTelemetry traces when the standard OTEL_*
// variables ask for them, and stays out of the way when they do not.
//
// Tracing is off by default: the issuer then installs no middleware and no
// Redis hook, so an untraced request costs what it did before. It is on when
// the environment names a traces exporter or an OTLP endpoint:
//
//	OTEL_TRACES_EXPORTER=otlp|console      (none: off)
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318
//	OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=...
//
// and OTEL_SDK_DISABLED=true turns it off whatever else is set. Everything
// else is read by the OpenTelemetry SDK itself, as in any service:
// OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf by default, or grpc),
// OTEL_EXPORTER_OTLP_HEADERS, OTEL_TRACES_SAMPLER and its argument,
// OTEL_SERVICE_NAME (snowtoken by default) and OTEL_RESOURCE_ATTRIBUTES.
// Trace context comes in and goes out as W3C traceparent and baggage.
//
// The span tree of one request:
//
//	POST /token                      server span (otelgin), parent: the caller's traceparent
//	├── redis.store EVALSHA ...      the request's commands, from queueing to answer
//	└── (rate limit, readiness: go-redis spans of their own commands)
//
// Concurrent requests share Redis pipelines (token's batcher), so the
// pipeline itself is one span of its own, "redis.batch", linked to the
// span of every request it carried, with go-redis's pipeline span under it.
package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName names the service when OTEL_SERVICE_NAME does not.
const ServiceName = "snowtoken"

// Propagator reads and writes trace context on HTTP: W3C traceparent and
// baggage, the OpenTelemetry default.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(
	propagation.TraceContext{}, propagation.Baggage{})

// Enabled reports whether env asks for traces; see the package doc.
func Enabled(env map[string]string) bool {
	if strings.EqualFold(strings.TrimSpace(env["OTEL_SDK_DISABLED"]), "true") {
		return false
	}
	if e := strings.TrimSpace(env["OTEL_TRACES_EXPORTER"]); e != "" {
		return e != "none"
	}
	return env["OTEL_EXPORTER_OTLP_ENDPOINT"] != "" || env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] != ""
}

// Start returns a tracer provider that exports as env asks, and the
// function that flushes and stops it. When env does not ask for traces it
// returns a nil provider and a no-op stop: callers install nothing.
func Start(ctx context.Context, env map[string]string, version string) (trace.TracerProvider, func(context.Context) error, error) {
	if !Enabled(env) {
		return nil, func(context.Context) error { return nil }, nil
	}
	exp, err := newExporter(ctx, env)
	if err != nil {
		return nil, nil, err
	}
	res, err := resource.Merge(
		resource.NewSchemaless(semconv.ServiceName(ServiceName), semconv.ServiceVersion(version)),
		resource.Environment(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	// The sampler comes from OTEL_TRACES_SAMPLER (parent-based, always on,
	// by default): the SDK reads it when none is given here.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// Errors for settings this package does not follow.
var (
	ErrExporter = errors.New("tracing: unsupported OTEL_TRACES_EXPORTER")
	ErrProtocol = errors.New("tracing: unsupported OTEL_EXPORTER_OTLP_PROTOCOL")
)

// newExporter is the exporter env names: OTLP (the default), over HTTP
// (http/protobuf, port 4318, the OpenTelemetry default) or gRPC (port 4317),
// or console (JSON lines on stdout, for a look). The OTLP exporters read
// OTEL_EXPORTER_OTLP_{,TRACES_}ENDPOINT, _HEADERS, _TIMEOUT, _COMPRESSION
// and the TLS settings themselves. (contrib's autoexport would choose the
// same way, but links the metrics and logs exporters too: 1.5 MB more.)
func newExporter(ctx context.Context, env map[string]string) (sdktrace.SpanExporter, error) {
	switch e := strings.TrimSpace(env["OTEL_TRACES_EXPORTER"]); e {
	case "", "otlp":
	case "console":
		return stdouttrace.New()
	default:
		return nil, fmt.Errorf("%w %q: use otlp, console or none", ErrExporter, e)
	}
	p := cmp.Or(strings.TrimSpace(env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]), strings.TrimSpace(env["OTEL_EXPORTER_OTLP_PROTOCOL"]))
	switch p {
	case "", "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("%w %q: use http/protobuf or grpc", ErrProtocol, p)
	}
}
