package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/internal/jwttest"
	"github.com/snowtoken/snowtoken/client/txntoken"
)

// chainIssuer stands in for the issuer of the Compose stack's call chain:
// its JWKS, GET /token/validate vouching for the access tokens it knows,
// and POST /token giving orders-service its own token.
type chainIssuer struct {
	URL    string
	key    ed25519.PrivateKey
	tokens map[string]map[string]any // access token -> the validation's answer
	mu     sync.Mutex
	asked  []string // the access tokens /token/validate was asked about
}

const (
	chainDomain   = "shop.internal"
	serviceID     = "orders-service"
	serviceSecret = "s3cret-of-orders-service"
)

func newChainIssuer(t *testing.T) *chainIssuer {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &chainIssuer{key: key, tokens: map[string]map[string]any{}}
	now := time.Now().Unix()
	for _, tc := range []struct{ sub, client, scope string }{
		{"demo", "demo", "orders:read"},
		{serviceID, serviceID, "invoices:read"},
	} {
		tok := jwttest.Sign(t, jwt.SigningMethodEdDSA, key, map[string]any{"kid": "k1", "typ": "at+jwt"}, jwt.MapClaims{"sub": tc.sub})
		is.tokens[tok] = map[string]any{"active": true, "sub": tc.sub, "client_id": tc.client, "scope": tc.scope,
			"iat": now, "exp": now + 300, "jti": "4198400"}
	}
	jwks := `{"keys":[{"kty":"OKP","crv":"Ed25519","use":"sig","alg":"EdDSA","kid":"k1","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/jwks.json":
			_, _ = io.WriteString(w, jwks)
		case "/token/validate":
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			is.mu.Lock()
			is.asked = append(is.asked, tok)
			is.mu.Unlock()
			answer, ok := is.tokens[tok]
			if !ok {
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"error":"invalid_token"}`)
				return
			}
			for _, want := range strings.Fields(r.URL.Query().Get("scope")) {
				if !strings.Contains(" "+answer["scope"].(string)+" ", " "+want+" ") {
					w.WriteHeader(http.StatusForbidden)
					_, _ = io.WriteString(w, `{"error":"insufficient_scope"}`)
					return
				}
			}
			_ = json.NewEncoder(w).Encode(answer)
		case "/token":
			id, secret, _ := r.BasicAuth()
			if r.Method != http.MethodPost || id != serviceID || secret != serviceSecret || r.PostFormValue("grant_type") != "client_credentials" ||
				r.PostFormValue("scope") != "invoices:read" {
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": is.token(serviceID), "token_type": "Bearer", "expires_in": 300})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	is.URL = srv.URL
	return is
}

// token is the access token of subject sub.
func (is *chainIssuer) token(sub string) string {
	for tok, answer := range is.tokens {
		if answer["sub"] == sub {
			return tok
		}
	}
	return ""
}

// txnToken mints a Txn-Token for demo's request, as the gateway's
// validation does, of the trust domain domain.
func (is *chainIssuer) txnToken(t *testing.T, txn, domain string) string {
	t.Helper()
	now := time.Now()
	return jwttest.Sign(t, jwt.SigningMethodEdDSA, is.key, map[string]any{"kid": "k1", "typ": txntoken.Type}, &txntoken.Claims{
		IssuedAt: now.Unix(), ExpiresAt: now.Add(time.Minute).Unix(), Audience: domain, Txn: txn, Subject: "demo",
		Scope: "orders:read", Workload: "demo", Transaction: &txntoken.TransactionContext{ClientID: "demo"}})
}

// askedAbout counts the validations of tok.
func (is *chainIssuer) askedAbout(tok string) int {
	is.mu.Lock()
	defer is.mu.Unlock()
	n := 0
	for _, a := range is.asked {
		if a == tok {
			n++
		}
	}
	return n
}

// chainAnswer is a consumer's answer in the call chain.
type chainAnswer struct {
	Orders      []order      `json:"orders"`
	Invoices    []invoice    `json:"invoices"`
	Subject     string       `json:"subject"`
	ClientID    string       `json:"client_id"`
	Transaction transaction  `json:"transaction"`
	Next        *chainAnswer `json:"next"`
	Error       string       `json:"error"`
}

// get sends GET url with the access token and the Txn-Token (each left
// out when empty) and returns the status, the challenge and the answer.
func get(t *testing.T, url, accessToken, txnToken string) (int, string, chainAnswer) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accessToken != "" {
		req.Header.Set("Authorization", "Bearer "+accessToken)
	}
	if txnToken != "" {
		req.Header.Set(txntoken.Header, txnToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a chainAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("GET %s: %s, no JSON: %v", url, resp.Status, err)
	}
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), a
}

// startBilling runs the consumer as the Compose stack's billing runs.
func startBilling(t *testing.T, is *chainIssuer) string {
	t.Helper()
	return startEnv(t, map[string]string{"SNOWTOKEN_ISSUER_URL": is.URL, "CONSUMER_RESOURCE": "invoices", "CONSUMER_TXN_TRUST_DOMAIN": chainDomain})
}

// chainEnv is the environment of the Compose stack's consumer, which calls
// next, with the file of orders-service's secret in dir.
func chainEnv(t *testing.T, is *chainIssuer, next string) map[string]string {
	t.Helper()
	secretFile := filepath.Join(t.TempDir(), "orders-service.secret")
	if err := os.WriteFile(secretFile, []byte(serviceSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"SNOWTOKEN_ISSUER_URL": is.URL, "CONSUMER_TXN_TRUST_DOMAIN": chainDomain, "CONSUMER_NEXT_URL": next,
		"CONSUMER_NEXT_CLIENT_ID": serviceID, "CONSUMER_NEXT_SECRET_FILE": secretFile, "CONSUMER_NEXT_SCOPE": "invoices:read"}
}

// TestBilling: with CONSUMER_RESOURCE=invoices and a trust domain, the
// consumer serves /invoices only to a caller with an access token of scope
// invoices:read AND a Txn-Token of that domain, and answers with the
// Txn-Token's claims and the caller's client.
func TestBilling(t *testing.T) {
	is := newChainIssuer(t)
	billing := startBilling(t, is) + "/invoices"
	service, user := is.token(serviceID), is.token("demo")
	txn := is.txnToken(t, "117811659438825472", chainDomain)

	status, _, a := get(t, billing, service, txn)
	want := transaction{Txn: "117811659438825472", Subject: "demo", Scope: "orders:read", Workload: "demo"}
	if status != http.StatusOK || a.Transaction != want || a.ClientID != serviceID || a.Subject != serviceID || len(a.Invoices) == 0 {
		t.Errorf("billing with orders-service's token and a Txn-Token: %d %+v; want 200, invoices, client_id %s, transaction %+v", status, a, serviceID, want)
	}
	for _, tc := range []struct {
		name                  string
		accessToken, txnToken string
		status                int
		code, challenge       string
	}{
		{"no Txn-Token", service, "", http.StatusUnauthorized, "invalid_token", "Txn-Token "},
		{"a Txn-Token but no access token", "", txn, http.StatusUnauthorized, "invalid_token", "Bearer "},
		{"the Txn-Token as the access token", txn, txn, http.StatusUnauthorized, "invalid_token", "Bearer "},
		{"a Txn-Token of another trust domain", service, is.txnToken(t, "1", "other.internal"), http.StatusUnauthorized, "invalid_token", "Txn-Token "},
		{"an access token without invoices:read", user, txn, http.StatusForbidden, "insufficient_scope", "Bearer "},
	} {
		status, challenge, a := get(t, billing, tc.accessToken, tc.txnToken)
		if status != tc.status || a.Error != tc.code || !strings.HasPrefix(challenge, tc.challenge) || a.Invoices != nil {
			t.Errorf("%s: %d %q %+v; want %d %s with a %q challenge, no invoices", tc.name, status, challenge, a, tc.status, tc.code, tc.challenge)
		}
	}
	resp, err := http.Get(strings.TrimSuffix(billing, "/invoices") + "/orders")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("billing's /orders: %s, want 404: it serves /invoices alone", resp.Status)
	}
}

// TestChain: the Compose stack's consumer verifies the Txn-Token it gets,
// calls billing with it unchanged and with orders-service's own access
// token, and answers with both hops' view: the same txn and sub, billing's
// caller orders-service. A first hop with no Txn-Token is refused before
// billing is called; a failing billing is a 502 in OAuth 2.0's JSON, never
// half an answer.
func TestChain(t *testing.T) {
	is := newChainIssuer(t)
	billing := startBilling(t, is)
	orders := startEnv(t, chainEnv(t, is, billing+"/invoices")) + "/orders"
	user, service := is.token("demo"), is.token(serviceID)
	txn := is.txnToken(t, "117811659438825472", chainDomain)

	status, _, a := get(t, orders, user, txn)
	if status != http.StatusOK || a.Next == nil {
		t.Fatalf("GET /orders with the user's token and a Txn-Token: %d %+v, want 200 with billing's answer", status, a)
	}
	if a.Transaction.Txn != "117811659438825472" || a.Next.Transaction != a.Transaction || a.Next.Transaction.Subject != a.Subject {
		t.Errorf("the first hop saw %+v (subject %s), billing %+v: want the same Txn-Token, sub the user", a.Transaction, a.Subject, a.Next.Transaction)
	}
	if a.ClientID != "demo" || a.Next.ClientID != serviceID || len(a.Orders) == 0 || len(a.Next.Invoices) == 0 {
		t.Errorf("callers: first hop %q, billing %q; orders %d, invoices %d: want demo, %s, both", a.ClientID, a.Next.ClientID, len(a.Orders), len(a.Next.Invoices), serviceID)
	}
	if is.askedAbout(service) == 0 {
		t.Error("billing never asked the issuer about orders-service's token")
	}

	before := is.askedAbout(service)
	if status, _, a := get(t, orders, user, ""); status != http.StatusUnauthorized || a.Error != "invalid_token" || a.Next != nil {
		t.Errorf("GET /orders without a Txn-Token: %d %+v, want 401 invalid_token", status, a)
	}
	if is.askedAbout(service) != before {
		t.Error("the first hop called billing for a request it refused")
	}

	for name, next := range map[string]http.HandlerFunc{
		"billing refuses": func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid_token"}`)
		},
		"billing answers no JSON object": func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `[1]`) },
	} {
		failing := httptest.NewServer(next)
		t.Cleanup(failing.Close)
		orders := startEnv(t, chainEnv(t, is, failing.URL+"/invoices")) + "/orders"
		if status, _, a := get(t, orders, user, txn); status != http.StatusBadGateway || a.Error != "server_error" || a.Orders != nil || a.Next != nil {
			t.Errorf("%s: %d %+v, want 502 server_error and nothing else", name, status, a)
		}
	}
}

// TestChainRejectsBadConfiguration: every combination of the chain's
// variables that makes no sense stops the consumer at start.
func TestChainRejectsBadConfiguration(t *testing.T) {
	ok := chainEnv(t, &chainIssuer{URL: "http://issuer:8080"}, "http://billing:8081/invoices")
	ok["CONSUMER_ADDR"] = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // served and stopped at once
	if err := run(ctx, nil, func(k string) string { return ok[k] }, io.Discard); err != nil {
		t.Fatalf("the Compose stack's configuration: %v", err)
	}
	for name, edit := range map[string]func(map[string]string){
		"unknown resource":                  func(m map[string]string) { m["CONSUMER_RESOURCE"] = "payments" },
		"a next hop without a trust domain": func(m map[string]string) { delete(m, "CONSUMER_TXN_TRUST_DOMAIN") },
		"a next hop without a client":       func(m map[string]string) { delete(m, "CONSUMER_NEXT_CLIENT_ID") },
		"a next hop without a secret file":  func(m map[string]string) { delete(m, "CONSUMER_NEXT_SECRET_FILE") },
		"a missing secret file":             func(m map[string]string) { m["CONSUMER_NEXT_SECRET_FILE"] = "/nonexistent" },
		"a client without a next hop":       func(m map[string]string) { delete(m, "CONSUMER_NEXT_URL") },
		"a next hop that is no URL":         func(m map[string]string) { m["CONSUMER_NEXT_URL"] = "billing:8081/invoices" },
		"a next hop with another scheme":    func(m map[string]string) { m["CONSUMER_NEXT_URL"] = "ftp://billing/invoices" },
		"a scope without a next hop": func(m map[string]string) {
			clear(m)
			m["SNOWTOKEN_ISSUER_URL"] = "http://issuer:8080"
			m["CONSUMER_NEXT_SCOPE"] = "x"
		},
	} {
		env := map[string]string{}
		for k, v := range ok {
			env[k] = v
		}
		edit(env)
		badConfiguration(t, name, nil, env)
	}
}
