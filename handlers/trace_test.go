package handlers_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/token"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestTraceOfIssue checks the span tree of POST /token: a server span that
// continues the caller's trace, the request's Redis call as its child, and
// the pipeline that carried it as a span of its own linked to that child.
func TestTraceOfIssue(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newEnv(t, withTracing(tp))

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"orders:read"}}
	r := e.do(t, http.MethodPost, "/token", strings.NewReader(form.Encode()), http.Header{
		"Authorization": {basic(e.Normal.ID, e.Normal.Secret)},
		"Content-Type":  {formType},
		"Traceparent":   {parent},
	})
	if r.Status != http.StatusOK {
		t.Fatalf("POST /token: %d %s", r.Status, r.Body)
	}
	if err := tp.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}

	var server, store, batch sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch {
		case s.SpanKind() == trace.SpanKindServer:
			server = s
		case strings.HasPrefix(s.Name(), "redis.store "):
			store = s
		case s.Name() == "redis.batch":
			batch = s
		}
	}
	if server == nil || store == nil || batch == nil {
		t.Fatalf("spans %v: want a server span, a redis.store span and a redis.batch span", names(rec.Ended()))
	}
	if server.Name() != "/token" && server.Name() != "POST /token" {
		t.Errorf("server span %q, want it named for the route", server.Name())
	}
	if got := server.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("server span in trace %s, want the caller's (traceparent)", got)
	}
	if got := server.Parent().SpanID().String(); got != "00f067aa0ba902b7" {
		t.Errorf("server span's parent %s, want the caller's span", got)
	}
	if store.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Errorf("%s: parent %s, want the server span %s", store.Name(), store.Parent().SpanID(), server.SpanContext().SpanID())
	}
	if store.SpanKind() != trace.SpanKindClient {
		t.Errorf("%s: kind %v, want client", store.Name(), store.SpanKind())
	}
	linked := false
	for _, l := range batch.Links() {
		linked = linked || l.SpanContext.SpanID() == store.SpanContext().SpanID()
	}
	if !linked {
		t.Errorf("redis.batch links %v, want one to %s", batch.Links(), store.Name())
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name())
	}
	return n
}

// BenchmarkTracing measures POST /token and GET /token/validate through the
// engine (no network), with tracing off (no TracerProvider: the default)
// and on (every span sampled, exported to nowhere), so that the cost of each
// reads off one run:
//
//	go test -run '^$' -bench Tracing -benchmem -count 6 ./handlers/ | benchstat -col /tracing -
func BenchmarkTracing(b *testing.B) {
	for _, mode := range []string{"off", "on"} {
		var opts []envOption
		if mode == "on" {
			opts = append(opts, withTracing(sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))))
		}
		e := newEnv(b, opts...)
		tok := e.issue(b, e.Normal, nil).AccessToken
		form := url.Values{"grant_type": {"client_credentials"}}.Encode()
		b.Run("tracing="+mode+"/path=issue", func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader(form))
				req.Header.Set("Authorization", basic(e.Normal.ID, e.Normal.Secret))
				req.Header.Set("Content-Type", formType)
				serve(b, e, req)
			}
		})
		b.Run("tracing="+mode+"/path=validate", func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, "/token/validate", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				serve(b, e, req)
			}
		})
	}
}

// serve runs req through the engine and fails b unless it answers 200.
func serve(b *testing.B, e *env, req *http.Request) {
	w := httptest.NewRecorder()
	e.Engine.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		b.Fatalf("%s %s: %d %s", req.Method, req.URL.Path, w.Code, w.Body)
	}
}

// liveLog is a revocation log that finds every token live.
type liveLog struct{}

func (liveLog) Mark() token.LogMark                               { return 1 }
func (liveLog) Decide(time.Time, token.LogQuery) token.LogVerdict { return token.LogLive }

// BenchmarkValidateHot is GET /token/validate through the engine for a hot
// token decided from the revocation log: no Redis command, so what it
// measures is the HTTP layer's own cost beside Service.Validate's
// (token's BenchmarkValidateFromLog).
func BenchmarkValidateHot(b *testing.B) {
	e := newEnv(b, withRevocations(liveLog{}))
	for _, c := range []struct {
		name   string
		client client
	}{{"jwt", e.Normal}, {"opaque", e.Opaque}} {
		tok := e.issue(b, c.client, nil).AccessToken
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/token/validate", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			serve(b, e, req) // an opaque token's first validation reads Redis
			b.ReportAllocs()
			for b.Loop() {
				serve(b, e, req)
			}
		})
	}
}
