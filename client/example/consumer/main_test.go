package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// start runs the consumer against issuerURL on a free port and returns its
// base URL; it is stopped, and must stop cleanly, when the test ends.
func start(t *testing.T, issuerURL string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	env := map[string]string{"SNOWTOKEN_ISSUER_URL": issuerURL, "CONSUMER_ADDR": "127.0.0.1:0"}
	done := make(chan error, 1)
	go func() {
		err := run(ctx, nil, func(k string) string { return env[k] }, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run after shutdown: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("run did not return after its context ended")
		}
	})

	lines := bufio.NewReader(pr)
	first, err := lines.ReadBytes('\n') // the "listening" log line
	if err != nil {
		t.Fatalf("no start-up log: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, lines) }()
	var l struct{ Msg, Addr string }
	if err := json.Unmarshal(first, &l); err != nil || l.Msg != "listening" || l.Addr == "" {
		t.Fatalf("start-up log %q: %v", first, err)
	}
	return "http://" + l.Addr
}

func TestRunRejectsBadConfiguration(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
	}{
		"no issuer URL": {nil, map[string]string{}},
		"bad issuer":    {nil, map[string]string{"SNOWTOKEN_ISSUER_URL": "issuer:8080"}},
		"bad address":   {nil, map[string]string{"SNOWTOKEN_ISSUER_URL": "http://issuer:8080", "CONSUMER_ADDR": "nope"}},
		"arguments":     {[]string{"serve"}, map[string]string{"SNOWTOKEN_ISSUER_URL": "http://issuer:8080"}},
	} {
		if err := run(t.Context(), tc.args, func(k string) string { return tc.env[k] }, io.Discard); err == nil {
			t.Errorf("%s: run returned nil, want an error", name)
		}
	}
}

func TestHealthcheck(t *testing.T) {
	base := start(t, "http://127.0.0.1:1") // the issuer is not asked about /healthz
	check := func(addr string) error {
		return run(t.Context(), []string{"healthcheck"}, func(k string) string { return map[string]string{"CONSUMER_ADDR": addr}[k] }, io.Discard)
	}
	// HEAD wherever GET is served (RFC 9110 §9.3.2): the mux's GET patterns match it.
	for _, path := range []string{"/healthz", "/orders"} {
		resp, err := http.Head(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode >= 500 {
			t.Errorf("HEAD %s: %d, want GET's status", path, resp.StatusCode)
		}
	}
	_, port, _ := strings.Cut(strings.TrimPrefix(base, "http://"), ":")
	for _, addr := range []string{":" + port, "127.0.0.1:" + port, "0.0.0.0:" + port} {
		if err := check(addr); err != nil {
			t.Errorf("healthcheck with CONSUMER_ADDR=%s, consumer up: %v", addr, err)
		}
	}
	// Nothing listens there: the check fails.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := ln.Addr().String()
	ln.Close()
	if err := check(free); err == nil {
		t.Errorf("healthcheck with CONSUMER_ADDR=%s, nothing listening: nil, want an error", free)
	}
	if err := check("nope"); err == nil {
		t.Error("healthcheck with CONSUMER_ADDR=nope: nil, want an error")
	}
}
