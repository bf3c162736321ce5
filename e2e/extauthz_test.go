package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Envoy's ext_authz gRPC front door (SNOWTOKEN_EXTAUTHZ_ADDR, package
// handlers/extauthz) on the real binary, called with a client made of
// Envoy's own generated types: for every case of one table, Check answers
// what GET /token/validate answers for the same token, proof, original
// request (X-Forwarded-* from a DPoP forwarder there, the CheckRequest's
// attributes here) and requirements (?audience= and ?scope= there, the
// context extensions here): status, error code and description,
// WWW-Authenticate, and on a pass the identity headers.

// The original request the gateway asks about, in both forms.
const (
	extMethod, extScheme, extHost, extPath = http.MethodGet, "https", "api.test", "/orders?page=2"
	extHTU                                 = extScheme + "://" + extHost + "/orders"
)

// extAuthzIssuer starts a production issuer with the ext_authz listener,
// 127.0.0.1 a DPoP forwarder (the HTTP side of the comparison), and a gRPC
// client of it: TestExtAuthz's.
func extAuthzIssuer(t *testing.T) (*issuer, authv3.AuthorizationClient, *grpc.ClientConn) {
	t.Helper()
	addr := fleetAddr(t, "127.0.0.1")
	p := startIssuer(t, issuerOpts{env: []string{"SNOWTOKEN_EXTAUTHZ_ADDR", addr, "SNOWTOKEN_DPOP_FORWARDERS", "127.0.0.1"}})
	if got := p.findLog("listening")["extauthz_addr"]; got != addr {
		t.Fatalf("listening: extauthz_addr %v, want %s", got, addr)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return p, authv3.NewAuthorizationClient(conn), conn
}

// extCase is one row of the table both front doors are asked.
type extCase struct {
	name     string
	authz    string // the Authorization header; none: ""
	proof    func(t *testing.T) string
	audience string // required; none: ""
	scope    string
	status   int
	code     string // the OAuth2 error; none on a pass
}

// TestExtAuthz runs both groups on one issuer.
func TestExtAuthz(t *testing.T) {
	p, client, conn := extAuthzIssuer(t)
	t.Run("matches GET /token/validate", func(t *testing.T) { matchesValidate(t, p, client, conn) })
	t.Run("limits", func(t *testing.T) { extAuthzLimits(t, p, client) })
}

func matchesValidate(t *testing.T, p *issuer, client authv3.AuthorizationClient, conn *grpc.ClientConn) {
	valid := p.issue(t, p.creds.svc, "alice")
	revoked := p.issue(t, p.creds.svc, "bob")
	if st := p.revoke(t, p.creds.svc, revoked); st != http.StatusOK {
		t.Fatalf("revoke: %d", st)
	}
	k := newJoseKey(t, jose.EdDSA)
	bound := k.boundToken(t, p, p.creds.svc)
	proofOf := func(method, htu string) func(t *testing.T) string {
		return func(t *testing.T) string { return k.proof(t, method, htu, bound) }
	}
	cases := []extCase{
		{name: "valid", authz: "Bearer " + valid.AccessToken, status: 200},
		{name: "valid with its scope", authz: "Bearer " + valid.AccessToken, scope: "read", status: 200},
		{name: "expired", authz: "Bearer " + expired(t, p, valid.AccessToken), status: 401, code: "invalid_token"},
		{name: "revoked", authz: "Bearer " + revoked.AccessToken, status: 401, code: "invalid_token"},
		{name: "tampered", authz: "Bearer " + tampered(valid.AccessToken), status: 401, code: "invalid_token"},
		{name: "DPoP-bound with its proof", authz: "DPoP " + bound, proof: proofOf(extMethod, extHTU), status: 200},
		{name: "DPoP-bound without a proof", authz: "DPoP " + bound, status: 401, code: "invalid_dpop_proof"},
		{name: "DPoP-bound with a proof of another URL", authz: "DPoP " + bound, proof: proofOf(extMethod, "https://api.test/admin"), status: 401, code: "invalid_dpop_proof"},
		{name: "DPoP-bound with a proof of another method", authz: "DPoP " + bound, proof: proofOf(http.MethodPost, extHTU), status: 401, code: "invalid_dpop_proof"},
		{name: "DPoP-bound as Bearer", authz: "Bearer " + bound, status: 401, code: "invalid_token"},
		{name: "wrong audience", authz: "Bearer " + valid.AccessToken, audience: "https://billing.test", status: 401, code: "invalid_token"},
		{name: "missing scope", authz: "Bearer " + valid.AccessToken, scope: "read admin", status: 403, code: "insufficient_scope"},
		{name: "malformed scope", authz: "Bearer " + valid.AccessToken, scope: "read  write", status: 400, code: "invalid_request"},
		{name: "no token", status: 401, code: "invalid_token"},
		{name: "another scheme", authz: "Basic c3ZjOnNlY3JldA==", status: 401, code: "invalid_token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			httpAns := c.viaHTTP(t, p)
			grpcAns, resp := c.viaCheck(t, client)
			if httpAns.status != c.status || httpAns.body["error"] != nilIfEmpty(c.code) {
				t.Errorf("GET /token/validate: %d %v, want %d %s", httpAns.status, httpAns.body, c.status, c.code)
			}
			if grpcAns.status != httpAns.status {
				t.Errorf("Check: status %d, GET /token/validate %d", grpcAns.status, httpAns.status)
			}
			for _, h := range []string{"WWW-Authenticate", "Retry-After", "X-Auth-Subject", "X-Auth-Client", "X-Auth-Scope", "X-Auth-Token-Id"} {
				if g, w := grpcAns.header.Get(h), httpAns.header.Get(h); g != w {
					t.Errorf("Check: %s %q, GET /token/validate %q", h, g, w)
				}
			}
			if c.status == http.StatusOK {
				if resp.GetStatus().GetCode() != int32(codes.OK) || resp.GetOkResponse() == nil {
					t.Errorf("Check: %v, want OK with an ok_response", resp)
				}
				return
			}
			if resp.GetStatus().GetCode() == int32(codes.OK) {
				t.Errorf("Check: a refusal with gRPC status OK: %v", resp)
			}
			if !maps.EqualFunc(grpcAns.body, httpAns.body, func(a, b any) bool { return a == b }) {
				t.Errorf("Check body %v, GET /token/validate body %v", grpcAns.body, httpAns.body)
			}
		})
	}

	t.Run("health SERVING", func(t *testing.T) {
		for _, svc := range []string{"", "envoy.service.auth.v3.Authorization"} {
			r, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("health of %q: %v %v, want SERVING", svc, r, err)
			}
		}
	})
	t.Run("counted", func(t *testing.T) {
		_, body := doRequest(t, mustRequest(t, p.metricsURL(t)))
		for _, want := range []string{`snowtoken_extauthz_checks_total{outcome="valid"}`, `snowtoken_extauthz_checks_total{outcome="revoked"}`, `snowtoken_extauthz_checks_total{outcome="dpop_refused"}`} {
			if !strings.Contains(string(body), want+" ") || strings.Contains(string(body), want+" 0\n") {
				t.Errorf("/metrics has no count of %s", want)
			}
		}
	})
}

// nilIfEmpty is code as the body holds it: none for "".
func nilIfEmpty(code string) any {
	if code == "" {
		return nil
	}
	return code
}

// viaHTTP asks GET /token/validate as a gateway's auth_request does.
func (c extCase) viaHTTP(t *testing.T, p *issuer) answer {
	t.Helper()
	q := url.Values{}
	if c.audience != "" {
		q.Set("audience", c.audience)
	}
	if c.scope != "" {
		q.Set("scope", c.scope)
	}
	u := p.url("/token/validate")
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	hdr := http.Header{"X-Forwarded-Method": {extMethod}, "X-Forwarded-Proto": {extScheme}, "X-Forwarded-Host": {extHost}, "X-Forwarded-Uri": {extPath}}
	if c.authz != "" {
		hdr.Set("Authorization", c.authz)
	}
	if c.proof != nil {
		hdr.Set("DPoP", c.proof(t))
	}
	return send(t, fleetHTTP, http.MethodGet, u, "", hdr)
}

// viaCheck asks Check as Envoy does, and reads its answer as the HTTP
// answer Envoy makes of it.
func (c extCase) viaCheck(t *testing.T, client authv3.AuthorizationClient) (answer, *authv3.CheckResponse) {
	t.Helper()
	headers := map[string]string{":authority": extHost, ":method": extMethod, ":path": extPath, "x-auth-subject": "forged"}
	if c.authz != "" {
		headers["authorization"] = c.authz
	}
	if c.proof != nil {
		headers["dpop"] = c.proof(t)
	}
	ext := map[string]string{}
	if c.audience != "" {
		ext["audience"] = c.audience
	}
	if c.scope != "" {
		ext["scope"] = c.scope
	}
	resp, err := client.Check(t.Context(), checkRequest(headers, ext))
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	a := answer{status: http.StatusOK, header: http.Header{}}
	if d := resp.GetDeniedResponse(); d != nil {
		a.status = int(d.GetStatus().GetCode())
		addHeaders(a.header, d.GetHeaders())
		if err := json.Unmarshal([]byte(d.GetBody()), &a.body); err != nil {
			t.Fatalf("Check: denied body not JSON: %q", d.GetBody())
		}
		return a, resp
	}
	ok := resp.GetOkResponse()
	addHeaders(a.header, ok.GetHeaders())
	if a.header.Get("X-Auth-Subject") == "" && !slices.Contains(ok.GetHeadersToRemove(), "x-auth-subject") {
		t.Errorf("Check: the client's X-Auth-Subject is neither replaced nor removed: %v", ok)
	}
	return a, resp
}

// checkRequest is a CheckRequest of the original request with headers and
// the route's context extensions ext.
func checkRequest(headers, ext map[string]string) *authv3.CheckRequest {
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: extMethod, Scheme: extScheme, Host: extHost, Path: extPath, Headers: headers, Protocol: "HTTP/1.1",
		}},
		ContextExtensions: ext,
	}}
}

// addHeaders adds the headers of a CheckResponse to h, each replacing the
// copies before (OVERWRITE_IF_EXISTS_OR_ADD, which is all the server uses).
func addHeaders(h http.Header, opts []*corev3.HeaderValueOption) {
	for _, o := range opts {
		h.Set(o.GetHeader().GetKey(), o.GetHeader().GetValue())
	}
}

// expired is tok with its iat and exp an hour and more in the past,
// signed again with p's signing key: a token the issuer made, expired.
func expired(t *testing.T, p *issuer, tok string) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	c["iat"], c["nbf"], c["exp"] = now-7200, now-7200, now-3600
	if raw, err = json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	pemBytes, err := os.ReadFile(p.creds.keyPath)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pemBytes)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	signed := parts[0] + "." + base64.RawURLEncoding.EncodeToString(raw)
	return signed + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(key.(ed25519.PrivateKey), []byte(signed)))
}

// tampered is tok with one character of its claims changed.
func tampered(tok string) string {
	i := strings.IndexByte(tok, '.') + 5
	b := []byte(tok)
	b[i] ^= 1
	return string(b)
}

// extAuthzLimits: what only the gRPC door has. A client's copy of an
// identity header is replaced on a pass; a context extension other than
// audience and scope is the server's error; a CheckRequest past the size
// bound is refused before it is read; a call past its deadline is no pass.
func extAuthzLimits(t *testing.T, p *issuer, client authv3.AuthorizationClient) {
	tok := p.issue(t, p.creds.svc, "carol")
	headers := map[string]string{"authorization": "Bearer " + tok.AccessToken, "x-auth-subject": "root", "x-auth-client": "admin"}

	resp, err := client.Check(t.Context(), checkRequest(headers, nil))
	if err != nil || resp.GetOkResponse() == nil {
		t.Fatalf("Check: %v %v", resp, err)
	}
	got := http.Header{}
	addHeaders(got, resp.GetOkResponse().GetHeaders())
	if got.Get("X-Auth-Subject") != "carol" || got.Get("X-Auth-Client") != p.creds.svc.id {
		t.Errorf("identity headers %v, want X-Auth-Subject carol and X-Auth-Client %s, replacing the client's", got, p.creds.svc.id)
	}
	for _, o := range resp.GetOkResponse().GetHeaders() {
		if o.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
			t.Errorf("%s is %v, want OVERWRITE_IF_EXISTS_OR_ADD: a client's copy must not survive", o.GetHeader().GetKey(), o.GetAppendAction())
		}
	}

	t.Run("unknown context extension", func(t *testing.T) {
		resp, err := client.Check(t.Context(), checkRequest(headers, map[string]string{"scopes": "admin"}))
		if err != nil {
			t.Fatal(err)
		}
		if d := resp.GetDeniedResponse(); d == nil || d.GetStatus().GetCode() != http.StatusInternalServerError || !strings.Contains(d.GetBody(), `"server_error"`) {
			t.Errorf("Check with context extension scopes: %v, want denied 500 server_error", resp)
		}
		if rec := p.waitLog(t, "request failed"); rec["route"] != "ext_authz" || !strings.Contains(rec["err"].(string), `"scopes"`) {
			t.Errorf("logged %v, want the unknown key named", rec)
		}
	})
	t.Run("oversized", func(t *testing.T) {
		big := maps.Clone(headers)
		big["cookie"] = strings.Repeat("a", 256<<10)
		_, err := client.Check(t.Context(), checkRequest(big, nil))
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("Check of 256 KiB: %v, want ResourceExhausted", err)
		}
	})
	t.Run("deadline passed", func(t *testing.T) {
		ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel()
		resp, err := client.Check(ctx, checkRequest(headers, nil))
		if status.Code(err) != codes.DeadlineExceeded || resp != nil {
			t.Errorf("Check past its deadline: %v %v, want DeadlineExceeded", resp, err)
		}
	})
}
