package handlers_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/internal/jwttest"
	"github.com/snowtoken/snowtoken/token"
)

// dpopKey is a client's DPoP key; its proofs are made with golang-jwt, a
// library independent of the checker.
type dpopKey struct {
	method jwt.SigningMethod
	priv   crypto.Signer
	jwk    map[string]any
	thumb  string // computed here from the key's bytes (RFC 7638)
}

func newDPoPKey(tb testing.TB, alg string) *dpopKey {
	tb.Helper()
	b64 := base64.RawURLEncoding
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return b64.EncodeToString(h[:]) }
	if alg == "ES256" {
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		raw, _ := priv.PublicKey.Bytes()
		x, y := b64.EncodeToString(raw[1:33]), b64.EncodeToString(raw[33:])
		return &dpopKey{method: jwt.SigningMethodES256, priv: priv,
			jwk:   map[string]any{"kty": "EC", "crv": "P-256", "x": x, "y": y},
			thumb: sum(`{"crv":"P-256","kty":"EC","x":"` + x + `","y":"` + y + `"}`)}
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	x := b64.EncodeToString(pub)
	return &dpopKey{method: jwt.SigningMethodEdDSA, priv: priv,
		jwk:   map[string]any{"kty": "OKP", "crv": "Ed25519", "x": x},
		thumb: sum(`{"crv":"Ed25519","kty":"OKP","x":"` + x + `"}`)}
}

// proof is a proof by k of method and u at now, with ath for tok and nonce
// when not empty; edit, if set, changes its header and claims.
func (k *dpopKey) proof(tb testing.TB, method, u, tok, nonce string, now time.Time, edit func(h, c map[string]any)) string {
	tb.Helper()
	c := jwt.MapClaims{"jti": rand.Text(), "htm": method, "htu": u, "iat": now.Unix()}
	if tok != "" {
		c["ath"] = dpop.AccessTokenHash(tok)
	}
	if nonce != "" {
		c["nonce"] = nonce
	}
	h := map[string]any{"typ": "dpop+jwt", "jwk": k.jwk}
	if edit != nil {
		edit(h, c)
	}
	return jwttest.Sign(tb, k.method, k.priv, h, c)
}

// issueDPoP asks for a token for c with proof; the response as it came.
func (e *env) issueDPoP(tb testing.TB, c client, proof string) *response {
	tb.Helper()
	hdr := http.Header{"Content-Type": {formType}, "Authorization": {basic(c.ID, c.Secret)}}
	if proof != "" {
		hdr["Dpop"] = []string{proof}
	}
	return e.do(tb, http.MethodPost, "/token", strings.NewReader("grant_type=client_credentials"), hdr)
}

// boundToken issues a token for c bound to k, and checks its answer.
func (e *env) boundToken(tb testing.TB, c client, k *dpopKey) string {
	tb.Helper()
	r := e.issueDPoP(tb, c, k.proof(tb, "POST", e.URL+"/token", "", "", e.Clock.Now(), nil))
	if r.Status != http.StatusOK {
		tb.Fatalf("issue with a proof: %d %s", r.Status, r.Body)
	}
	o := r.object(tb)
	if o["token_type"] != "DPoP" {
		tb.Errorf("token_type %v, want DPoP", o["token_type"])
	}
	return o["access_token"].(string)
}

// validateDPoP calls GET /token/validate with tok under scheme and the
// proofs given (none, one, or several DPoP headers), and extra headers.
func (e *env) validateDPoP(tb testing.TB, scheme, tok string, proofs []string, extra http.Header) *response {
	tb.Helper()
	hdr := http.Header{"Authorization": {scheme + " " + tok}}
	if len(proofs) > 0 {
		hdr["Dpop"] = proofs
	}
	for k, v := range extra {
		hdr[k] = v
	}
	return e.do(tb, http.MethodGet, "/token/validate", nil, hdr)
}

// wantDPoPChallenge checks a 401 with an RFC 9449 §7.1 challenge of code.
func wantDPoPChallenge(tb testing.TB, r *response, code string) {
	tb.Helper()
	wantError(tb, r, http.StatusUnauthorized, code)
	if h := r.Header.Get("WWW-Authenticate"); h != `DPoP realm="snowtoken", algs="EdDSA ES256", error="`+code+`"` {
		tb.Errorf("WWW-Authenticate %q, want a DPoP challenge with error %q", h, code)
	}
}

// TestDPoPIssue: a proof of the token endpoint binds the token to its key,
// for a JWT (cnf.jkt) and an opaque token alike, with either algorithm; a
// request without a proof gets a bearer token, except for a
// dpop_bound_access_tokens client.
func TestDPoPIssue(t *testing.T) {
	e := newEnv(t)
	for _, alg := range []string{"EdDSA", "ES256"} {
		k := newDPoPKey(t, alg)
		tok := e.boundToken(t, e.Normal, k)
		_, claims := segments(t, tok)
		if cnf, _ := claims["cnf"].(map[string]any); cnf["jkt"] != k.thumb {
			t.Errorf("%s: cnf %v, want jkt %s", alg, claims["cnf"], k.thumb)
		}
		r := e.validateDPoP(t, "DPoP", tok, []string{k.proof(t, "GET", e.URL+"/token/validate", tok, "", e.Clock.Now(), nil)}, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: validate a bound token with its proof: %d %s", alg, r.Status, r.Body)
		}
		if cnf, _ := r.object(t)["cnf"].(map[string]any); cnf["jkt"] != k.thumb {
			t.Errorf("%s: validate answers cnf %v", alg, r.object(t)["cnf"])
		}
		opaque := e.boundToken(t, e.Opaque, k)
		r = e.validateDPoP(t, "DPoP", opaque, []string{k.proof(t, "GET", e.URL+"/token/validate", opaque, "", e.Clock.Now(), nil)}, nil)
		if r.Status != http.StatusOK {
			t.Errorf("%s: validate a bound opaque token with its proof: %d %s", alg, r.Status, r.Body)
		}
		wantDPoPChallenge(t, e.validate(t, opaque), "invalid_token") // as Bearer
	}
	if tok := e.issue(t, e.Normal, nil); tok.TokenType != "Bearer" {
		t.Errorf("without a proof: token_type %q", tok.TokenType)
	}
	r := e.issueDPoP(t, e.Bound, "")
	wantError(t, r, http.StatusBadRequest, "invalid_dpop_proof")
	k := newDPoPKey(t, "EdDSA")
	e.boundToken(t, e.Bound, k)
}

// TestDPoPIssueRefuses: every refusal of a proof at the token endpoint is
// a 400 invalid_dpop_proof (RFC 9449 §5), and no token is issued.
func TestDPoPIssueRefuses(t *testing.T) {
	e := newEnv(t)
	k, other := newDPoPKey(t, "EdDSA"), newDPoPKey(t, "ES256")
	now := e.Clock.Now()
	replayed := k.proof(t, "POST", e.URL+"/token", "", "", now, nil)
	e.boundToken(t, e.Normal, k) // a first use of a proof
	_ = e.issueDPoP(t, e.Normal, replayed)
	for name, proof := range map[string]string{
		"replayed":          replayed,
		"another URL":       k.proof(t, "POST", "https://elsewhere.example/token", "", "", now, nil),
		"another method":    k.proof(t, "GET", e.URL+"/token", "", "", now, nil),
		"too old":           k.proof(t, "POST", e.URL+"/token", "", "", now.Add(-2*time.Minute), nil),
		"another key's jwk": k.proof(t, "POST", e.URL+"/token", "", "", now, func(h, _ map[string]any) { h["jwk"] = other.jwk }),
		"typ JWT":           k.proof(t, "POST", e.URL+"/token", "", "", now, func(h, _ map[string]any) { h["typ"] = "JWT" }),
		"alg none":          noneProof(t, k, e.URL+"/token", now),
		"HS256":             hsProof(t, k, e.URL+"/token", now),
		"not a JWS":         "not.a.proof",
	} {
		r := e.issueDPoP(t, e.Normal, proof)
		if r.Status != http.StatusBadRequest || r.object(t)["error"] != "invalid_dpop_proof" {
			t.Errorf("%s: %d %s, want 400 invalid_dpop_proof", name, r.Status, r.Body)
		}
	}
	hdr := http.Header{"Content-Type": {formType}, "Authorization": {basic(e.Normal.ID, e.Normal.Secret)},
		"Dpop": {k.proof(t, "POST", e.URL+"/token", "", "", now, nil), k.proof(t, "POST", e.URL+"/token", "", "", now, nil)}}
	wantError(t, e.do(t, http.MethodPost, "/token", strings.NewReader("grant_type=client_credentials"), hdr),
		http.StatusBadRequest, "invalid_dpop_proof")
}

// noneProof is k's proof with alg none and no signature.
func noneProof(tb testing.TB, k *dpopKey, u string, now time.Time) string {
	tb.Helper()
	return jwttest.Sign(tb, jwt.SigningMethodNone, nil, map[string]any{"typ": "dpop+jwt", "jwk": k.jwk},
		jwt.MapClaims{"jti": rand.Text(), "htm": "POST", "htu": u, "iat": now.Unix()})
}

// hsProof is a proof MACed with HS256 under the public key's x as secret.
func hsProof(tb testing.TB, k *dpopKey, u string, now time.Time) string {
	tb.Helper()
	return jwttest.Sign(tb, jwt.SigningMethodHS256, []byte(k.jwk["x"].(string)), map[string]any{"typ": "dpop+jwt", "jwk": k.jwk},
		jwt.MapClaims{"jti": rand.Text(), "htm": "POST", "htu": u, "iat": now.Unix()})
}

// TestDPoPValidateRefuses: a bound token counts only with a proof by its
// key of this request, once; each refusal is a 401 with a DPoP challenge.
func TestDPoPValidateRefuses(t *testing.T) {
	e := newEnv(t)
	k, other := newDPoPKey(t, "EdDSA"), newDPoPKey(t, "EdDSA")
	tok := e.boundToken(t, e.Normal, k)
	now, u := e.Clock.Now(), e.URL+"/token/validate"
	good := k.proof(t, "GET", u, tok, "", now, nil)
	if r := e.validateDPoP(t, "DPoP", tok, []string{good}, nil); r.Status != http.StatusOK {
		t.Fatalf("first use: %d %s", r.Status, r.Body)
	}
	for name, tc := range map[string]struct {
		scheme string
		proofs []string
		code   string
	}{
		"replayed":             {"DPoP", []string{good}, "invalid_dpop_proof"},
		"as Bearer":            {"Bearer", nil, "invalid_token"},
		"as Bearer, proof":     {"Bearer", []string{k.proof(t, "GET", u, tok, "", now, nil)}, "invalid_token"},
		"no proof":             {"DPoP", nil, "invalid_dpop_proof"},
		"two proofs":           {"DPoP", []string{k.proof(t, "GET", u, tok, "", now, nil), k.proof(t, "GET", u, tok, "", now, nil)}, "invalid_dpop_proof"},
		"another key":          {"DPoP", []string{other.proof(t, "GET", u, tok, "", now, nil)}, "invalid_dpop_proof"},
		"another URL":          {"DPoP", []string{k.proof(t, "GET", "https://api.example/orders", tok, "", now, nil)}, "invalid_dpop_proof"},
		"another method":       {"DPoP", []string{k.proof(t, "POST", u, tok, "", now, nil)}, "invalid_dpop_proof"},
		"no ath":               {"DPoP", []string{k.proof(t, "GET", u, "", "", now, nil)}, "invalid_dpop_proof"},
		"another token's ath":  {"DPoP", []string{k.proof(t, "GET", u, "eyJ.other.token", "", now, nil)}, "invalid_dpop_proof"},
		"alg none":             {"DPoP", []string{noneProof(t, k, u, now)}, "invalid_dpop_proof"},
		"the token endpoint's": {"DPoP", []string{k.proof(t, "POST", e.URL+"/token", "", "", now, nil)}, "invalid_dpop_proof"},
	} {
		t.Run(name, func(t *testing.T) {
			wantDPoPChallenge(t, e.validateDPoP(t, tc.scheme, tok, tc.proofs, nil), tc.code)
		})
	}
	if got := e.metrics(t)[`snowtoken_validations_total{format="jwt",outcome="dpop_refused"}`]; got == "" || got == "0" {
		t.Errorf("DPoP refusals are not counted as dpop_refused: %q", got)
	}
	// A bearer token presented as DPoP is refused too: it binds nothing.
	bearerTok := e.issue(t, e.Normal, nil).AccessToken
	r := e.validateDPoP(t, "DPoP", bearerTok, []string{k.proof(t, "GET", u, bearerTok, "", now, nil)}, nil)
	wantError(t, r, http.StatusUnauthorized, "invalid_token")
}

// forwarded is the original request a gateway names in its call.
func forwarded(method, proto, host, uri string) http.Header {
	return http.Header{"X-Forwarded-Method": {method}, "X-Forwarded-Proto": {proto}, "X-Forwarded-Host": {host}, "X-Forwarded-Uri": {uri}}
}

// TestDPoPForwarded: from a DPoP forwarder, the proof is checked against
// the original request the forwarder names; from anyone else, a trusted
// proxy (which names the client's address alone) included, those headers
// are ignored and the proof must name GET /token/validate itself.
func TestDPoPForwarded(t *testing.T) {
	const api = "https://api.example/orders/17"
	fwd := forwarded("PATCH", "https", "api.example", "/orders/17?expand=lines")
	trusted := newEnv(t, withDPoPForwarders("127.0.0.1"))
	k := newDPoPKey(t, "ES256")
	tok := trusted.boundToken(t, trusted.Normal, k)
	now := trusted.Clock.Now()
	if r := trusted.validateDPoP(t, "DPoP", tok, []string{k.proof(t, "PATCH", api, tok, "", now, nil)}, fwd); r.Status != http.StatusOK {
		t.Fatalf("from a DPoP forwarder: %d %s", r.Status, r.Body)
	}
	// The proof of the validation URL is not the original request's.
	wantDPoPChallenge(t, trusted.validateDPoP(t, "DPoP", tok, []string{k.proof(t, "GET", trusted.URL+"/token/validate", tok, "", now, nil)}, fwd), "invalid_dpop_proof")
	for name, h := range map[string]http.Header{
		"no host":      {"X-Forwarded-Method": {"GET"}, "X-Forwarded-Proto": {"https"}, "X-Forwarded-Uri": {"/"}},
		"bad proto":    forwarded("GET", "ftp", "api.example", "/"),
		"bad method":   forwarded("G T", "https", "api.example", "/"),
		"relative uri": forwarded("GET", "https", "api.example", "orders"),
		"host path":    forwarded("GET", "https", "api.example/x", "/"),
	} {
		t.Run(name, func(t *testing.T) {
			wantError(t, trusted.validateDPoP(t, "DPoP", tok, []string{k.proof(t, "GET", api, tok, "", now, nil)}, h), http.StatusBadRequest, "invalid_request")
		})
	}

	for name, direct := range map[string]*env{
		"no one listed":                 newEnv(t),
		"a trusted proxy, no forwarder": newEnv(t, withTrustedProxies("127.0.0.1")),
	} {
		t.Run(name, func(t *testing.T) {
			k := newDPoPKey(t, "EdDSA")
			tok := direct.boundToken(t, direct.Normal, k)
			r := direct.validateDPoP(t, "DPoP", tok, []string{k.proof(t, "PATCH", api, tok, "", now, nil)}, fwd)
			wantDPoPChallenge(t, r, "invalid_dpop_proof")
			if d, _ := r.object(t)["error_description"].(string); !strings.Contains(d, "not in SNOWTOKEN_DPOP_FORWARDERS") {
				t.Errorf("forwarded headers from a caller that is not a forwarder: description %q does not say they were ignored", d)
			}
			if r := direct.validateDPoP(t, "DPoP", tok, []string{k.proof(t, "GET", direct.URL+"/token/validate", tok, "", now, nil)}, fwd); r.Status != http.StatusOK {
				t.Errorf("a direct call's own URL, forwarded headers ignored: %d %s", r.Status, r.Body)
			}
		})
	}
}

// TestDPoPNonces: with nonces on, a proof without the current nonce gets
// use_dpop_nonce and a DPoP-Nonce to retry with (RFC 9449 §8), at the token
// endpoint (400) and at validation (401); a nonce goes stale after two
// windows.
func TestDPoPNonces(t *testing.T) {
	e := newEnv(t, withDPoP(dpop.Options{}, true))
	k := newDPoPKey(t, "EdDSA")
	r := e.issueDPoP(t, e.Normal, k.proof(t, "POST", e.URL+"/token", "", "", e.Clock.Now(), nil))
	wantError(t, r, http.StatusBadRequest, "use_dpop_nonce")
	nonce := r.Header.Get("DPoP-Nonce")
	if nonce == "" {
		t.Fatal("use_dpop_nonce without a DPoP-Nonce header")
	}
	r = e.issueDPoP(t, e.Normal, k.proof(t, "POST", e.URL+"/token", "", nonce, e.Clock.Now(), nil))
	if r.Status != http.StatusOK || r.Header.Get("DPoP-Nonce") == "" {
		t.Fatalf("with the nonce: %d %s, DPoP-Nonce %q", r.Status, r.Body, r.Header.Get("DPoP-Nonce"))
	}
	tok := r.object(t)["access_token"].(string)
	u := e.URL + "/token/validate"
	r = e.validateDPoP(t, "DPoP", tok, []string{k.proof(t, "GET", u, tok, "", e.Clock.Now(), nil)}, nil)
	wantDPoPChallenge(t, r, "use_dpop_nonce")
	if r.Header.Get("DPoP-Nonce") == "" {
		t.Error("use_dpop_nonce at validation without a DPoP-Nonce header")
	}
	if r := e.validateDPoP(t, "DPoP", tok, []string{k.proof(t, "GET", u, tok, nonce, e.Clock.Now(), nil)}, nil); r.Status != http.StatusOK {
		t.Errorf("validation with the nonce: %d %s", r.Status, r.Body)
	}
	for name, n := range map[string]string{"forged": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "short": "abc", "altered": alter(nonce, 20)} {
		t.Run(name, func(t *testing.T) {
			wantDPoPChallenge(t, e.validateDPoP(t, "DPoP", tok, []string{k.proof(t, "GET", u, tok, n, e.Clock.Now(), nil)}, nil), "use_dpop_nonce")
		})
	}
	e.Clock.Add(2 * time.Minute)
	wantDPoPChallenge(t, e.validateDPoP(t, "DPoP", tok, []string{k.proof(t, "GET", u, tok, nonce, e.Clock.Now(), nil)}, nil), "use_dpop_nonce")
}

// unavailableReplay is a replay record whose store does not answer, as
// redisstore.Proofs reports it: token.ErrUnavailable.
type unavailableReplay struct{}

func (unavailableReplay) Seen(context.Context, string, time.Time, time.Time) (bool, error) {
	return false, fmt.Errorf("%w: redis: %w", token.ErrUnavailable, errors.New("connection refused"))
}

// TestDPoPReplayRecordDown: a proof whose replay record cannot be written
// is never accepted: 503, as any Redis failure.
func TestDPoPReplayRecordDown(t *testing.T) {
	e := newEnv(t, withDPoP(dpop.Options{Replay: unavailableReplay{}}, false))
	k := newDPoPKey(t, "EdDSA")
	r := e.issueDPoP(t, e.Normal, k.proof(t, "POST", e.URL+"/token", "", "", e.Clock.Now(), nil))
	wantError(t, r, http.StatusServiceUnavailable, "temporarily_unavailable")
}

// TestDPoPIntrospection: introspection of a bound token answers its cnf
// and token_type DPoP (RFC 9449 §6.2); the metadata names the algorithms.
func TestDPoPIntrospection(t *testing.T) {
	e := newEnv(t)
	k := newDPoPKey(t, "EdDSA")
	tok := e.boundToken(t, e.Normal, k)
	o := e.post(t, "/token/introspect", &e.Normal, url.Values{"token": {tok}}).object(t)
	if cnf, _ := o["cnf"].(map[string]any); o["token_type"] != "DPoP" || cnf["jkt"] != k.thumb {
		t.Errorf("introspection: %v", o)
	}
	m := e.do(t, http.MethodGet, "/.well-known/oauth-authorization-server", nil, nil).object(t)
	if algs, _ := m["dpop_signing_alg_values_supported"].([]any); len(algs) != 2 || algs[0] != "EdDSA" || algs[1] != "ES256" {
		t.Errorf("dpop_signing_alg_values_supported %v", m["dpop_signing_alg_values_supported"])
	}
}

// alter returns s with its i-th byte changed to another base64url one.
func alter(s string, i int) string {
	c := byte('A')
	if s[i] == c {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}
