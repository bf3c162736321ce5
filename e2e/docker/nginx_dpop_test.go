package docker

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/dpop"
)

// gatewayPublic is the Compose stack's public URL (SNOWTOKEN_ISSUER): the
// one DPoP proofs name, as clients reach nginx.
const gatewayPublic = "http://localhost:8080"

// publicClient returns an HTTP transport that sends every request for
// gatewayPublic's host to addr (nginx on its test port): a client that
// names the gateway as Compose's clients do, so that its proofs' htu and the
// Host nginx passes on are the public ones.
func publicClient(addr string) *http.Transport {
	var d net.Dialer
	return &http.Transport{Proxy: nil, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
}

// dpopToken gets a DPoP-bound token with scope orders:read for client demo
// at POST gatewayPublic/token, through hc (a dpop.Transport, which answers
// the issuer's nonces by itself).
func dpopToken(tb testing.TB, hc *http.Client, secret string) string {
	tb.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"orders:read"}}
	req, err := http.NewRequestWithContext(tb.Context(), http.MethodPost, gatewayPublic+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("demo", secret)
	resp, err := hc.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tok) != nil || tok.AccessToken == "" || tok.TokenType != "DPoP" {
		tb.Fatalf("POST /token with a DPoP proof: %s %s; want a DPoP token", resp.Status, body)
	}
	return tok.AccessToken
}

// wantDPoPChallenge checks that resp is a 401 with one DPoP challenge
// (RFC 9449 §7.1) naming code.
func wantDPoPChallenge(tb testing.TB, resp *http.Response, body, code string) {
	tb.Helper()
	c := resp.Header.Values("WWW-Authenticate")
	if resp.StatusCode != http.StatusUnauthorized || len(c) != 1 || !strings.HasPrefix(c[0], "DPoP ") || !strings.Contains(c[0], `error="`+code+`"`) {
		tb.Errorf("%s %s, WWW-Authenticate %q; want 401 with a DPoP challenge, error=%q", resp.Status, body, c, code)
	}
}

// TestNginxDPoP runs nginx/default.conf in front of the real issuer, which
// asks for nonces (SNOWTOKEN_DPOP_NONCE) and trusts nginx's address, with
// a DPoP-bound token on both of the gateway's ways to a service:
//
//   - /orders: nginx's auth_request has the issuer check the proof against
//     the original request, GET http://localhost:8080/orders, which nginx
//     names in X-Forwarded-*; a nonce the issuer asks for reaches the
//     client, a replayed proof is refused. The upstream is a stand-in that
//     echoes: the consumer there (remote mode, no CONSUMER_PUBLIC_URL)
//     refuses Authorization: DPoP, and asking the issuer again about the
//     proof nginx had checked would be a replay.
//   - /dpop/orders: no auth_request; the real consumer binary with
//     CONSUMER_PUBLIC_URL, as consumer-dpop runs, checks the token and its
//     proof with the issuer.
//
// And a client's own X-Forwarded-* never reach the issuer's routes.
func TestNginxDPoP(t *testing.T) {
	nginx := nginxBinary(t)
	iss := newTestIssuer(t, gatewayPublic, true)
	issuerRec := &recorder{next: iss.handler}
	issuerSrv := httptest.NewServer(issuerRec)
	t.Cleanup(issuerSrv.Close)

	echoRec := &recorder{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"subject": r.Header.Get("X-Auth-Subject")})
	})}
	echo := httptest.NewServer(echoRec)
	t.Cleanup(echo.Close)

	consumerURL, _ := url.Parse("http://" + startConsumer(t, issuerSrv.URL, gatewayPublic+"/dpop"))
	consumerRec := &recorder{next: httputil.NewSingleHostReverseProxy(consumerURL)}
	consumerSrv := httptest.NewServer(consumerRec)
	t.Cleanup(consumerSrv.Close)

	gw := startNginx(t, nginx, nginxHosts{resolver: "127.0.0.11", issuer: issuerSrv.Listener.Addr().String(),
		consumer: echo.Listener.Addr().String(), consumerDPoP: consumerSrv.Listener.Addr().String()})
	base := publicClient(strings.TrimPrefix(gw, "http://"))
	t.Cleanup(base.CloseIdleConnections)
	plain := &http.Client{Timeout: 10 * time.Second, Transport: base}
	prover, err := dpop.GenerateProver()
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &dpop.Transport{Base: base, Prover: prover}}
	tok := dpopToken(t, client, iss.secret)

	// proof is a proof of GET gatewayPublic+path by prover, for tok.
	proof := func(t *testing.T, path, nonce string) string {
		t.Helper()
		p, err := prover.Proof(http.MethodGet, gatewayPublic+path, tok, nonce, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	withProof := func(p string) http.Header { return http.Header{"Authorization": {"DPoP " + tok}, "Dpop": {p}} }
	forwarded := http.Header{
		"X-Forwarded-Method": {"GET"}, "X-Forwarded-Proto": {"http"},
		"X-Forwarded-Host": {"localhost:8080"}, "X-Forwarded-Uri": {"/orders"},
	}

	var nonce string
	t.Run("auth_request passes the issuer's nonce on a 401", func(t *testing.T) {
		before := echoRec.count()
		resp, body := callGateway(t, plain, gatewayPublic, "GET", "/orders", withProof(proof(t, "/orders", "")), "")
		wantDPoPChallenge(t, resp, body, "use_dpop_nonce")
		if nonce = resp.Header.Get("DPoP-Nonce"); nonce == "" {
			t.Fatalf("the 401 asking for a nonce carries no DPoP-Nonce: %v", resp.Header)
		}
		if echoRec.count() != before {
			t.Error("the upstream was reached with a proof the issuer refused")
		}
	})

	var accepted string
	t.Run("auth_request checks a proof of the original request", func(t *testing.T) {
		accepted = proof(t, "/orders", nonce)
		resp, body := callGateway(t, plain, gatewayPublic, "GET", "/orders", withProof(accepted), "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"subject":"demo"`) {
			t.Fatalf("GET /orders with a proof of %s/orders: %s %s, want 200 from the upstream", gatewayPublic, resp.Status, body)
		}
		got := issuerRec.last(t)
		for k, want := range map[string]string{"X-Forwarded-Method": "GET", "X-Forwarded-Proto": "http", "X-Forwarded-Host": "localhost:8080", "X-Forwarded-Uri": "/orders"} {
			if v := got.Values(k); len(v) != 1 || v[0] != want {
				t.Errorf("the issuer's validation request had %s %q, want %q from nginx", k, v, want)
			}
		}
		if got.Get("Dpop") == "" || got.Get("Authorization") != "DPoP "+tok {
			t.Error("nginx did not pass the client's Authorization: DPoP and proof to the issuer")
		}
	})

	t.Run("a replayed proof is 401 at auth_request", func(t *testing.T) {
		before := echoRec.count()
		resp, body := callGateway(t, plain, gatewayPublic, "GET", "/orders", withProof(accepted), "")
		wantDPoPChallenge(t, resp, body, "invalid_dpop_proof")
		if echoRec.count() != before {
			t.Error("the upstream was reached with a replayed proof")
		}
	})

	t.Run("auth_request checks the proof against the public origin, never the client's Host", func(t *testing.T) {
		// A proof made for another service, sent with that service's Host:
		// nginx names its own public origin, so the proof's htu does not match.
		const elsewhere = "http://orders.elsewhere.example"
		p, err := prover.Proof(http.MethodGet, elsewhere+"/orders", tok, nonce, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		before := echoRec.count()
		resp, body := callGateway(t, plain, elsewhere, "GET", "/orders", withProof(p), "")
		wantDPoPChallenge(t, resp, body, "invalid_dpop_proof")
		if echoRec.count() != before {
			t.Error("the upstream was reached with a proof made for another host")
		}
	})

	t.Run("the bound token as Bearer is 401 at auth_request", func(t *testing.T) {
		resp, body := callGateway(t, plain, gatewayPublic, "GET", "/orders", http.Header{"Authorization": {"Bearer " + tok}}, "")
		wantDPoPChallenge(t, resp, body, "invalid_token")
	})

	t.Run("a client's X-Forwarded-* never reach the issuer", func(t *testing.T) {
		// A proof of GET /orders sent to GET /token/validate, naming /orders
		// in the headers a trusted gateway sets: nginx drops them, so the
		// issuer checks the proof against /token/validate and refuses it.
		h := withProof(proof(t, "/orders", nonce))
		for k, v := range forwarded {
			h[k] = v
		}
		resp, body := callGateway(t, plain, gatewayPublic, "GET", "/token/validate?scope=orders:read", h, "")
		wantDPoPChallenge(t, resp, body, "invalid_dpop_proof")
		got := issuerRec.last(t)
		for _, k := range []string{"X-Forwarded-Method", "X-Forwarded-Host", "X-Forwarded-Uri"} {
			if v := got.Values(k); len(v) > 0 {
				t.Errorf("the issuer got the client's %s %q through /token", k, v)
			}
		}
		// A proof of the request itself passes: the refusal was the htu's.
		resp, body = callGateway(t, plain, gatewayPublic, "GET", "/token/validate?scope=orders:read", withProof(proof(t, "/token/validate", nonce)), "")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /token/validate with a proof of it: %s %s, want 200", resp.Status, body)
		}
	})

	t.Run("/dpop/orders reaches the DPoP consumer, which checks the proof", func(t *testing.T) {
		h := http.Header{"Authorization": {"DPoP " + tok}, "X-Auth-Subject": {"admin"}}
		for k, v := range forwarded {
			h[k] = v
		}
		resp, body := callGateway(t, client, gatewayPublic, "GET", "/dpop/orders", h, "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"subject":"demo"`) {
			t.Fatalf("GET /dpop/orders with a dpop.Transport: %s %s, want the consumer's 200", resp.Status, body)
		}
		got := consumerRec.last(t)
		for _, k := range []string{"X-Forwarded-Method", "X-Forwarded-Host", "X-Forwarded-Uri", "X-Auth-Subject"} {
			if v := got.Values(k); len(v) > 0 {
				t.Errorf("the consumer got the client's %s %q", k, v)
			}
		}
		// The consumer named the request as the client made it.
		v := issuerRec.last(t)
		if v.Get("X-Forwarded-Host") != "localhost:8080" || v.Get("X-Forwarded-Uri") != "/dpop/orders" {
			t.Errorf("the consumer's validation request named %s %s, want localhost:8080 /dpop/orders", v.Get("X-Forwarded-Host"), v.Get("X-Forwarded-Uri"))
		}
	})

	t.Run("/dpop/orders refuses the bound token as Bearer", func(t *testing.T) {
		resp, body := callGateway(t, plain, gatewayPublic, "GET", "/dpop/orders", http.Header{"Authorization": {"Bearer " + tok}}, "")
		wantDPoPChallenge(t, resp, body, "invalid_token")
	})

	t.Run("only /dpop/orders of the DPoP consumer is routed", func(t *testing.T) {
		before := consumerRec.count()
		for _, p := range []string{"/dpop/healthz", "/dpop/", "/dpop/orders/1"} {
			if resp, body := callGateway(t, plain, gatewayPublic, "GET", p, nil, ""); resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s: %s %s, want the gateway's 404", p, resp.Status, body)
			}
		}
		if consumerRec.count() != before {
			t.Error("a path other than /dpop/orders reached the DPoP consumer")
		}
	})
}
