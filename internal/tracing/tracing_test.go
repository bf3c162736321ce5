package tracing

import (
	"errors"
	"testing"
)

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, false},
	} {
		if got := Enabled(tc.env); got != tc.want {
			t.Errorf("Enabled(%v) = %t, want %t", tc.env, got, tc.want)
		}
	}
}

func TestStart(t *testing.T) {
	tp, stop, err := Start(t.Context(), map[string]string{}, "v1")
	if err != nil || tp != nil || stop(t.Context()) != nil {
		t.Fatalf("off: Start = %v, %v; want a nil provider and a stop that does nothing", tp, err)
	}
	for _, tc := range []struct {
		env  map[string]string
		want error
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, ErrExporter},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, ErrProtocol},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"}, ErrProtocol},
	} {
		if _, _, err := Start(t.Context(), tc.env, "v1"); !errors.Is(err, tc.want) {
			t.Errorf("%v: %v, want %v", tc.env, err, tc.want)
		}
	}
	tp, stop, err = Start(t.Context(), map[string]string{"OTEL_TRACES_EXPORTER": "console"}, "v1")
	if err != nil || tp == nil {
		t.Fatalf("console: %v, %v", tp, err)
	}
	if err := stop(t.Context()); err != nil {
		t.Fatal(err)
	}
}
