package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/dpop"
)

// start runs the consumer against issuerURL, with CONSUMER_PUBLIC_URL
// publicURL, on a free port and returns its base URL; it is stopped, and
// must stop cleanly, when the test ends.
func start(t *testing.T, issuerURL, publicURL string) string {
	t.Helper()
	return startEnv(t, map[string]string{"SNOWTOKEN_ISSUER_URL": issuerURL, "CONSUMER_PUBLIC_URL": publicURL})
}

// startEnv is start with the environment env, and CONSUMER_ADDR a free
// loopback port.
func startEnv(t *testing.T, env map[string]string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	env = maps.Clone(env)
	env["CONSUMER_ADDR"] = "127.0.0.1:0"
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
		"no issuer URL":           {nil, map[string]string{}},
		"bad issuer":              {nil, map[string]string{"SNOWTOKEN_ISSUER_URL": "issuer:8080"}},
		"bad address":             {nil, map[string]string{"SNOWTOKEN_ISSUER_URL": "http://issuer:8080", "CONSUMER_ADDR": "nope"}},
		"arguments":               {[]string{"serve"}, map[string]string{"SNOWTOKEN_ISSUER_URL": "http://issuer:8080"}},
		"bad public URL":          {nil, map[string]string{"SNOWTOKEN_ISSUER_URL": "http://issuer:8080", "CONSUMER_ADDR": "127.0.0.1:0", "CONSUMER_PUBLIC_URL": "localhost:8080/dpop"}},
		"public URL with a query": {nil, map[string]string{"SNOWTOKEN_ISSUER_URL": "http://issuer:8080", "CONSUMER_ADDR": "127.0.0.1:0", "CONSUMER_PUBLIC_URL": "http://localhost:8080/dpop?x=1"}},
	} {
		badConfiguration(t, name, tc.args, tc.env)
	}
}

// badConfiguration fails t unless run refuses args and env.
func badConfiguration(t *testing.T, name string, args []string, env map[string]string) {
	t.Helper()
	// Done already: a configuration run wrongly accepts is served and
	// stopped at once, and the case fails instead of serving on.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := run(ctx, args, func(k string) string { return env[k] }, io.Discard); err == nil {
		t.Errorf("%s: run returned nil, want an error", name)
	}
}

func TestHealthcheck(t *testing.T) {
	base := start(t, "http://127.0.0.1:1", "") // the issuer is not asked about /healthz
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

// TestDPoP: with CONSUMER_PUBLIC_URL, a DPoP-bound token with a proof of the
// request as the client made it, under that URL, reaches /orders; the
// consumer sends the issuer the token, the proof and that request. The same
// token as Bearer is refused, and without CONSUMER_PUBLIC_URL so is the DPoP
// request, before the issuer is asked. (The issuer's own checks of the
// proof run in e2e/docker/nginx_dpop_test.go, with the real one.)
func TestDPoP(t *testing.T) {
	prover, err := dpop.GenerateProver()
	if err != nil {
		t.Fatal(err)
	}
	const tok = "eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJkZW1vIn0.c2lnbmF0dXJl" // JWT-shaped; the stand-in issuer vouches for it
	var (
		mu    sync.Mutex
		calls []http.Header
	)
	issuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Header.Clone())
		mu.Unlock()
		now := time.Now().Unix()
		_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "sub": "demo", "client_id": "demo", "scope": "orders:read",
			"iat": now, "exp": now + 300, "jti": "4198400", "cnf": map[string]string{"jkt": prover.Thumbprint()}})
	}))
	t.Cleanup(issuer.Close)
	asked := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(calls)
	}
	const public = "http://localhost:8080/dpop" // as the Compose stack sets it
	get := func(base, scheme string, proof string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+"/orders", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", scheme+" "+tok)
		if proof != "" {
			req.Header.Set("DPoP", proof)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	proof := func(htu string) string {
		t.Helper()
		p, err := prover.Proof(http.MethodGet, htu, tok, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	on := start(t, issuer.URL, public)
	if status, body := get(on, "DPoP", proof(public+"/orders")); status != http.StatusOK || !strings.Contains(body, `"subject":"demo"`) {
		t.Fatalf("DPoP with a proof of %s/orders: %d %s, want 200 with the orders", public, status, body)
	}
	mu.Lock()
	got := calls[len(calls)-1]
	mu.Unlock()
	for k, want := range map[string]string{
		"Authorization": "DPoP " + tok, "X-Forwarded-Method": "GET", "X-Forwarded-Proto": "http",
		"X-Forwarded-Host": "localhost:8080", "X-Forwarded-Uri": "/dpop/orders",
	} {
		if v := got.Values(k); len(v) != 1 || v[0] != want {
			t.Errorf("the issuer got %s %q, want %q", k, v, want)
		}
	}
	if got.Get("DPoP") == "" {
		t.Error("the issuer got no DPoP proof to check")
	}
	// A proof of the consumer's own address, as the request reached it, is not
	// of the request its client made.
	if status, body := get(on, "DPoP", proof(on+"/orders")); status != http.StatusUnauthorized {
		t.Errorf("DPoP with a proof of %s/orders: %d %s, want 401", on, status, body)
	}
	if status, body := get(on, "Bearer", ""); status != http.StatusUnauthorized {
		t.Errorf("the bound token as Bearer: %d %s, want 401", status, body)
	}

	off := start(t, issuer.URL, "")
	before := asked()
	if status, body := get(off, "DPoP", proof(public+"/orders")); status != http.StatusUnauthorized {
		t.Errorf("DPoP without CONSUMER_PUBLIC_URL: %d %s, want 401", status, body)
	}
	if asked() != before {
		t.Error("without CONSUMER_PUBLIC_URL the consumer asked the issuer about a DPoP request")
	}
}
