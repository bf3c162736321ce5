package docker

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/dpop"
)

// proxy is one proxy the repository ships a configuration for, started
// in front of an issuer and an upstream (host:port each) as its shipped
// file says, and answering at the URL start returns; start skips (fails
// under the proxy's variable) when the proxy is missing.
type proxy struct {
	name  string
	start func(tb testing.TB, issuer, upstream string) string
	// ownRefusals: the proxy answers a refusal with a body of its own
	// (nginx's error_page), so only the status and the challenge are the
	// issuer's; the others pass the issuer's JSON body on too.
	ownRefusals bool
}

// proxies are the three: nginx (auth_request), Caddy (forward_auth) and
// Traefik (ForwardAuth).
var proxies = []proxy{
	{name: "nginx", ownRefusals: true, start: func(tb testing.TB, issuer, upstream string) string {
		return startNginx(tb, nginxBinary(tb), nginxHosts{resolver: "127.0.0.11", issuer: issuer, consumer: upstream, consumerDPoP: "127.0.0.1:1"})
	}},
	{name: "caddy", start: func(tb testing.TB, issuer, upstream string) string {
		return startCaddy(tb, caddyBinary(tb), issuer, upstream)
	}},
	{name: "traefik", start: func(tb testing.TB, issuer, upstream string) string {
		return startTraefik(tb, traefikBinary(tb), issuer, upstream)
	}},
}

// gatewayCase is one request to GET /orders through a gateway, and what
// the issuer answers it: a pass (200, the upstream reached with identity)
// or a refusal (status, challenge, error code; the upstream not reached).
type gatewayCase struct {
	name string
	// header is the client's request's headers, made anew for each request
	// (a DPoP proof is accepted once).
	header func(t *testing.T) http.Header
	status int
	// challenge is how the WWW-Authenticate of a refusal starts (its
	// scheme), code the error it names (none: the challenge has no error).
	challenge, code string
	// identity is what a pass gives the upstream in X-Auth-*.
	identity map[string]string
}

// forgedIdentity are the identity headers a client sends in the hope that
// the upstream believes them, under their names and their aliases (an
// underscore for each hyphen, which some frameworks read as the same).
var forgedIdentity = http.Header{
	"X-Auth-Subject":  {"admin"},
	"X-Auth-Client":   {"admin"},
	"X-Auth-Scope":    {"orders:read orders:write admin"},
	"X-Auth-Token-Id": {"1"},
	"X-Auth-Actor":    {"admin"},
	"Txn-Token":       {"forged"},
	"X_Auth_Subject":  {"admin"},
	"X_Auth_Client":   {"admin"},
	"X_Auth_Scope":    {"orders:read orders:write admin"},
	"X_Auth_Token_Id": {"1"},
	"X_Auth_Actor":    {"admin"},
}

// TestGatewaysForwardAuth runs each gateway's shipped configuration
// (nginx/default.conf, caddy/Caddyfile, traefik/*.yml) in the real proxy in
// front of the real issuer and an upstream that records what reaches it,
// with one table of requests to /orders: a valid token reaches the upstream
// with the issuer's identity headers and never a client's; every refusal
// (no token, tampered, expired, revoked, lacking the scope, a DPoP-bound
// token without its proof, as Bearer, with a proof of another request, or
// with the client naming the original request itself) gets the issuer's
// status and WWW-Authenticate challenge (and, but through nginx, its JSON
// body), and the upstream is not reached; and a client's own X-Forwarded-*
// never reach the issuer's routes. Each case is first asked of the
// issuer itself, as the gateway should ask it (GET /token/validate with the
// original request in X-Forwarded-*), and its answer must be the table's:
// the gateways' answers are then compared with it.
func TestGatewaysForwardAuth(t *testing.T) {
	iss := newTestIssuer(t, gatewayPublic, false)
	issuerSrv := httptest.NewServer(iss.handler)
	t.Cleanup(issuerSrv.Close)
	upstream := &recorder{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"subject": r.Header.Get("X-Auth-Subject")})
	})}
	upstreamSrv := httptest.NewServer(upstream)
	t.Cleanup(upstreamSrv.Close)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(hc.CloseIdleConnections)

	// demo is client demo's credentials, in a new header.
	demo := func() http.Header {
		req, _ := http.NewRequest("POST", "/", nil)
		req.SetBasicAuth("demo", iss.secret)
		return http.Header{"Authorization": req.Header["Authorization"]}
	}
	// issue gets a token from the issuer for scope, bound to prover's key
	// when there is one.
	issue := func(scope string, prover *dpop.Prover) (access, jti string) {
		t.Helper()
		h := demo()
		if prover != nil {
			p, err := prover.Proof(http.MethodPost, gatewayPublic+"/token", "", "", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			h.Set("DPoP", p)
		}
		resp, body := callGateway(t, hc, issuerSrv.URL, "POST", "/token", h, url.Values{"grant_type": {"client_credentials"}, "scope": {scope}}.Encode())
		var tok struct {
			AccessToken string `json:"access_token"`
			TokenID     string `json:"jti"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &tok) != nil || tok.AccessToken == "" {
			t.Fatalf("POST /token: %s %s", resp.Status, body)
		}
		return tok.AccessToken, tok.TokenID
	}
	valid, validID := issue("orders:read orders:write", nil)
	writer, _ := issue("orders:write", nil)
	revoked, _ := issue("orders:read", nil)
	if resp, body := callGateway(t, hc, issuerSrv.URL, "POST", "/token/revoke", demo(), url.Values{"token": {revoked}}.Encode()); resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /token/revoke: %s %s", resp.Status, body)
	}
	iss.skew.Store(int64(-2 * time.Hour)) // issued two hours ago, for an hour
	expired, _ := issue("orders:read", nil)
	iss.skew.Store(0)
	prover, err := dpop.GenerateProver()
	if err != nil {
		t.Fatal(err)
	}
	bound, boundID := issue("orders:read", prover)
	// A character of the signature changed: the same claims, not signed.
	i := len(valid) - 10
	tampered := valid[:i] + map[bool]string{true: "A", false: "B"}[valid[i] != 'A'] + valid[i+1:]

	bearer := func(tok string) func(*testing.T) http.Header {
		return func(*testing.T) http.Header {
			h := forgedIdentity.Clone()
			h.Set("Authorization", "Bearer "+tok)
			return h
		}
	}
	// withProof presents the bound token with a proof of GET u.
	withProof := func(u string, extra http.Header) func(*testing.T) http.Header {
		return func(t *testing.T) http.Header {
			t.Helper()
			p, err := prover.Proof(http.MethodGet, u, bound, "", time.Now())
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{"Authorization": {"DPoP " + bound}, "Dpop": {p}}
			for k, v := range extra {
				h[k] = v
			}
			return h
		}
	}
	cases := []gatewayCase{
		{name: "valid token, forged identity", header: bearer(valid), status: http.StatusOK,
			identity: map[string]string{"X-Auth-Subject": "demo", "X-Auth-Client": "demo", "X-Auth-Scope": "orders:read orders:write", "X-Auth-Token-Id": validID}},
		{name: "DPoP-bound token with a proof of the request", header: withProof(gatewayPublic+"/orders", forgedIdentity), status: http.StatusOK,
			identity: map[string]string{"X-Auth-Subject": "demo", "X-Auth-Client": "demo", "X-Auth-Scope": "orders:read", "X-Auth-Token-Id": boundID}},
		{name: "no token", header: func(*testing.T) http.Header { return forgedIdentity.Clone() },
			status: http.StatusUnauthorized, challenge: "Bearer ", code: ""},
		{name: "tampered token", header: bearer(tampered), status: http.StatusUnauthorized, challenge: "Bearer ", code: "invalid_token"},
		{name: "expired token", header: bearer(expired), status: http.StatusUnauthorized, challenge: "Bearer ", code: "invalid_token"},
		{name: "revoked token", header: bearer(revoked), status: http.StatusUnauthorized, challenge: "Bearer ", code: "invalid_token"},
		{name: "token without orders:read", header: bearer(writer), status: http.StatusForbidden, challenge: "Bearer ", code: "insufficient_scope"},
		{name: "DPoP-bound token without a proof", header: func(*testing.T) http.Header { return http.Header{"Authorization": {"DPoP " + bound}} },
			status: http.StatusUnauthorized, challenge: "DPoP ", code: "invalid_dpop_proof"},
		{name: "DPoP-bound token as Bearer", header: bearer(bound), status: http.StatusUnauthorized, challenge: "DPoP ", code: "invalid_token"},
		{name: "DPoP proof of another origin", header: withProof("http://orders.elsewhere.example/orders", nil),
			status: http.StatusUnauthorized, challenge: "DPoP ", code: "invalid_dpop_proof"},
		{name: "DPoP proof of another request, named by the client", header: withProof("http://orders.elsewhere.example/admin", http.Header{
			"X-Forwarded-Method": {"GET"}, "X-Forwarded-Proto": {"http"}, "X-Forwarded-Host": {"orders.elsewhere.example"}, "X-Forwarded-Uri": {"/admin"},
		}), status: http.StatusUnauthorized, challenge: "DPoP ", code: "invalid_dpop_proof"},
	}

	// The issuer's own answers, asked as a gateway asks: these are what
	// every gateway must pass on.
	type answer struct {
		status    int
		challenge string
		code      string
	}
	want := make([]answer, len(cases))
	for i, c := range cases {
		h := c.header(t)
		for k, v := range map[string]string{"X-Forwarded-Method": "GET", "X-Forwarded-Proto": "http", "X-Forwarded-Host": "localhost:8080", "X-Forwarded-Uri": "/orders"} {
			h.Set(k, v)
		}
		resp, body := callGateway(t, hc, issuerSrv.URL, "GET", "/token/validate?scope=orders:read", h, "")
		want[i] = answer{resp.StatusCode, resp.Header.Get("WWW-Authenticate"), jsonError(body)}
		if resp.StatusCode != c.status {
			t.Fatalf("%s: the issuer answers %s %s, the table says %d", c.name, resp.Status, body, c.status)
		}
		if c.status != http.StatusOK && (!strings.HasPrefix(want[i].challenge, c.challenge) || challengeError(want[i].challenge) != c.code) {
			t.Fatalf("%s: the issuer's challenge is %q, the table says %q with error %q", c.name, want[i].challenge, c.challenge, c.code)
		}
	}

	for _, g := range proxies {
		t.Run(g.name, func(t *testing.T) {
			base := g.start(t, issuerSrv.Listener.Addr().String(), upstreamSrv.Listener.Addr().String())
			for i, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					before := upstream.count()
					resp, body := callGateway(t, hc, base, "GET", "/orders", c.header(t), "")
					if resp.StatusCode != want[i].status {
						t.Fatalf("status %s %s; the issuer answers %d", resp.Status, body, want[i].status)
					}
					if c.status == http.StatusOK {
						if upstream.count() != before+1 {
							t.Fatalf("the upstream was reached %d times, want once", upstream.count()-before)
						}
						got := upstream.last(t)
						for k, v := range c.identity {
							if got := got.Values(k); len(got) != 1 || got[0] != v {
								t.Errorf("the upstream saw %s: %q, want only the issuer's %q", k, got, v)
							}
						}
						for k, v := range forgedIdentity { // what the issuer does not set (no actor, no Txn-Token asked for)
							if _, issuers := c.identity[k]; !issuers && slices.Contains(got.Values(k), v[0]) {
								t.Errorf("the upstream saw the client's %s: %q", k, got.Values(k))
							}
						}
						for k, v := range got {
							if strings.Contains(k, "_") && c.identity[textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(k, "_", "-"))] != "" {
								t.Errorf("the upstream saw the client's alias %s: %q", k, v)
							}
						}
						if !strings.Contains(body, `"subject":"demo"`) {
							t.Errorf("body %s, want the upstream's answer", body)
						}
						return
					}
					if upstream.count() != before {
						t.Error("the upstream was reached with a request the issuer refused")
					}
					if ch := resp.Header.Values("WWW-Authenticate"); len(ch) != 1 || ch[0] != want[i].challenge {
						t.Errorf("WWW-Authenticate %q, want the issuer's %q", ch, want[i].challenge)
					}
					if !g.ownRefusals && jsonError(body) != want[i].code {
						t.Errorf("body %s, want the issuer's JSON error %q", body, want[i].code)
					}
				})
			}
			t.Run("a client's X-Forwarded-* never reach the issuer's routes", func(t *testing.T) {
				// A proof of GET /orders sent to GET /token/validate, naming
				// /orders as a gateway's own check does: the issuer must get
				// none of it, and check the proof against /token/validate.
				h := withProof(gatewayPublic+"/orders", http.Header{
					"X-Forwarded-Method": {"GET"}, "X-Forwarded-Proto": {"http"}, "X-Forwarded-Host": {"localhost:8080"}, "X-Forwarded-Uri": {"/orders"},
				})(t)
				resp, body := callGateway(t, hc, base, "GET", "/token/validate?scope=orders:read", h, "")
				wantDPoPChallenge(t, resp, body, "invalid_dpop_proof")
			})
		})
	}
}

// jsonError is the error of an OAuth2 JSON error body, or "".
func jsonError(body string) string {
	var e struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &e)
	return e.Error
}

// challengeError is the error="…" of a WWW-Authenticate challenge, or "".
func challengeError(ch string) string {
	_, rest, ok := strings.Cut(ch, `error="`)
	if !ok {
		return ""
	}
	code, _, _ := strings.Cut(rest, `"`)
	return code
}
