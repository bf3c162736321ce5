package e2e

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client"
	"github.com/snowtoken/snowtoken/client/credentials"
	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/client/middlewaretest"
	"github.com/snowtoken/snowtoken/internal/jwttest"
	"github.com/snowtoken/snowtoken/internal/redistest"
)

// clusterIssuer is a stand-in of a Kubernetes cluster's service-account
// issuer: its OpenID discovery document and keys over TLS (its CA in
// caFile, as a pod mounts the cluster's), and the projected tokens it
// would give a pod.
type clusterIssuer struct {
	srv    *httptest.Server
	key    *rsa.PrivateKey
	caFile string
}

func newClusterIssuer(tb testing.TB) *clusterIssuer {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	ci := &clusterIssuer{key: key}
	b64 := base64.RawURLEncoding
	ci.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": ci.srv.URL, "jwks_uri": ci.srv.URL + "/openid/v1/jwks"})
		case "/openid/v1/jwks":
			_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "k8s-1",
				"n": b64.EncodeToString(key.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(key.E)).Bytes())}}})
		default:
			http.NotFound(w, r)
		}
	}))
	tb.Cleanup(ci.srv.Close)
	ci.caFile = filepath.Join(tb.TempDir(), "cluster-ca.crt")
	if err := os.WriteFile(ci.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ci.srv.Certificate().Raw}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return ci
}

// token is a projected service-account token of sub for aud, as the kubelet writes it.
func (ci *clusterIssuer) token(tb testing.TB, sub, aud string, now time.Time) string {
	tb.Helper()
	return jwttest.Sign(tb, jwt.SigningMethodRS256, ci.key, map[string]any{"kid": "k8s-1"}, jwt.MapClaims{"iss": ci.srv.URL, "sub": sub, "aud": []string{aud},
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": rand.Text()})
}

// TestSecretlessClients: clients with no shared secret against the real
// program, through client/credentials: a private_key_jwt client (its key in
// the clients file's jwks) and a workload whose cluster's service-account
// token is its assertion, each getting DPoP-bound tokens that a service's
// middleware accepts. An assertion replayed, and a workload token for
// another audience or service account, are refused.
func TestSecretlessClients(t *testing.T) {
	redisURL := os.Getenv(redistest.EnvURL)
	if redisURL == "" {
		t.Skipf("needs a real Redis: set %s", redistest.EnvURL)
	}
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "signing.pem")
	if err := run(t.Context(), []string{"keys", "new", "-out", keyPath}, nil, &strings.Builder{}); err != nil {
		t.Fatalf("keys new: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	issuer := "http://" + addr // the public URL: DPoP proofs and assertions name it
	cluster := newClusterIssuer(t)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	clients := fmt.Sprintf(`{"clients": [
	  {"id": "batch", "token_endpoint_auth_method": "private_key_jwt", "scopes": ["orders:read"], "dpop_bound_access_tokens": true,
	   "jwks": {"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "batch-1", "x": %q}]}},
	  {"id": "orders-caller", "scopes": ["orders:read"], "dpop_bound_access_tokens": true,
	   "workload_identity": {"issuer": %q, "subject": "system:serviceaccount:shop:orders-caller", "ca_file": %q}}]}`,
		base64.RawURLEncoding.EncodeToString(pub), cluster.srv.URL, cluster.caFile)
	clientsPath := filepath.Join(dir, "clients.json")
	if err := os.WriteFile(clientsPath, []byte(clients), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProgram(t, map[string]string{
		"SNOWTOKEN_ENV": "production", "SNOWTOKEN_ADDR": addr, "SNOWTOKEN_REDIS_URL": redisURL,
		"SNOWTOKEN_SIGNING_KEYS": keyPath, "SNOWTOKEN_CLIENTS_FILE": clientsPath, "SNOWTOKEN_ISSUER": issuer,
		"SNOWTOKEN_WORKER_ID": "4", "SNOWTOKEN_WORKER_LEASE_TTL": "1s",
		// The cluster is on loopback: the jwks_uri its discovery document
		// names reaches it only through the allow-list.
		"SNOWTOKEN_KEY_FETCH_ALLOW_NETS": "127.0.0.1",
	})
	waitReady(t, p.url("/readyz"), waitLimit)

	// The service both callers call: DPoP-bound tokens only.
	srv := httptest.NewUnstartedServer(nil)
	v, err := client.New(client.Options{IssuerURL: issuer, Mode: client.Local, RevocationCheck: client.Skip,
		DPoP: client.DPoP{PublicURL: "http://" + srv.Listener.Addr().String()}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = v.Middleware(middlewaretest.Echo, "orders:read")
	srv.Start()
	t.Cleanup(srv.Close)

	tokenPath := filepath.Join(dir, "sa-token")
	if err := os.WriteFile(tokenPath, []byte(cluster.token(t, "system:serviceaccount:shop:orders-caller", issuer, time.Now())), 0o600); err != nil {
		t.Fatal(err)
	}
	keyAssertion, err := credentials.KeyAssertion("batch", issuer, priv, "batch-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id     string
		source credentials.Options
	}{
		{id: "batch", source: credentials.Options{ClientID: "batch", Assertion: keyAssertion}},
		{id: "orders-caller", source: credentials.Options{ClientID: "orders-caller", Assertion: credentials.FileAssertion(tokenPath)}},
	} {
		t.Run(c.id, func(t *testing.T) {
			prover, _ := dpop.GenerateProver()
			proofs := &dpop.Transport{Prover: prover}
			opts := c.source
			opts.TokenURL, opts.HTTPClient = issuer+"/token", &http.Client{Transport: proofs}
			src, err := credentials.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			api := &http.Client{Transport: &credentials.Transport{Source: src, Base: proofs}}
			for i := range 2 {
				if status, body := get(t, api, srv.URL+"/orders", ""); status != http.StatusOK {
					t.Fatalf("call %d with a token got with no secret: %d %s", i, status, body)
				}
			}
			tok, _ := src.Token(t.Context())
			if tok.Type != "DPoP" {
				t.Errorf("token_type %q, want DPoP (dpop_bound_access_tokens)", tok.Type)
			}
		})
	}

	// Refusals, each 401 invalid_client.
	post := func(form url.Values) (int, []byte) {
		t.Helper()
		form.Set("grant_type", "client_credentials")
		req, _ := http.NewRequest(http.MethodPost, p.url("/token"), strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return doRequest(t, req)
	}
	assertion := func(id, a string) url.Values {
		return url.Values{"client_id": {id}, "client_assertion_type": {credentials.AssertionType}, "client_assertion": {a}}
	}
	once, _ := keyAssertion(t.Context(), time.Now())
	// Its first use, with no DPoP proof: the client authenticates (the jti
	// is spent), then gets no token, its tokens being DPoP-bound.
	if status, body := post(assertion("batch", once)); status != http.StatusBadRequest || !strings.Contains(string(body), `"invalid_dpop_proof"`) {
		t.Errorf("a dpop_bound_access_tokens client without a proof: %d %s, want 400 invalid_dpop_proof", status, body)
	}
	now := time.Now()
	for name, form := range map[string]url.Values{
		"a replayed assertion":             assertion("batch", once),
		"a workload token for another aud": assertion("orders-caller", cluster.token(t, "system:serviceaccount:shop:orders-caller", "https://elsewhere.example", now)),
		"another service account's token":  assertion("orders-caller", cluster.token(t, "system:serviceaccount:shop:intruder", issuer, now)),
	} {
		if status, body := post(form); status != http.StatusUnauthorized || !strings.Contains(string(body), `"invalid_client"`) {
			t.Errorf("%s: %d %s, want 401 invalid_client", name, status, body)
		}
	}
}
