package clientauth_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/dpop"
	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/internal/jwttest"
	"github.com/snowtoken/snowtoken/token/clientauth"
)

const (
	issuer   = "https://issuer.example"
	endpoint = issuer + "/token"
)

// t0 is the tests' time.
var t0 = time.Unix(1_800_000_000, 0)

// signer is a key pair of one algorithm.
type signer struct {
	alg    string
	kid    string
	method jwt.SigningMethod
	priv   crypto.Signer
}

var (
	rsaOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

// newSigner returns a fresh key pair for alg (the RSA key is made once
// per run: 2048-bit generation is slow).
func newSigner(tb testing.TB, alg, kid string) signer {
	tb.Helper()
	s := signer{alg: alg, kid: kid, method: jwt.GetSigningMethod(alg)}
	switch alg {
	case clientauth.AlgEdDSA:
		_, s.priv, _ = ed25519.GenerateKey(rand.Reader)
	case clientauth.AlgES256:
		s.priv, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case clientauth.AlgRS256, clientauth.AlgPS256:
		rsaOnce.Do(func() { rsaKey, _ = rsa.GenerateKey(rand.Reader, 2048) })
		s.priv = rsaKey
	default:
		tb.Fatalf("no signer for %s", alg)
	}
	return s
}

// jwk is the public JWK of s, with its kid and alg.
func (s signer) jwk(tb testing.TB) json.RawMessage {
	tb.Helper()
	b, err := jose.JSONWebKey{Key: s.priv.Public(), KeyID: s.kid, Algorithm: s.alg, Use: "sig"}.MarshalJSON()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// jwks is the key set of the signers' public keys.
func jwks(tb testing.TB, ss ...signer) []byte {
	tb.Helper()
	keys := make([]json.RawMessage, len(ss))
	for i, s := range ss {
		keys[i] = s.jwk(tb)
	}
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// keySet parses jwks(ss...).
func keySet(tb testing.TB, ss ...signer) *clientauth.KeySet {
	tb.Helper()
	ks, err := clientauth.ParseJWKS(jwks(tb, ss...))
	if err != nil {
		tb.Fatal(err)
	}
	return ks
}

// sign makes an assertion with claims, signed by s under its kid.
func (s signer) sign(tb testing.TB, claims jwt.MapClaims) string {
	tb.Helper()
	h := map[string]any{}
	if s.kid != "" {
		h["kid"] = s.kid
	}
	return jwttest.Sign(tb, s.method, s.priv, h, claims)
}

// claimsFor are a good private_key_jwt assertion's claims for client id.
func claimsFor(id string) jwt.MapClaims {
	return jwt.MapClaims{"iss": id, "sub": id, "aud": issuer, "exp": t0.Add(time.Minute).Unix(),
		"iat": t0.Unix(), "jti": "jti-" + randomID()}
}

func randomID() string { return rand.Text() }

// newVerifier returns a Verifier on a memory replay record and clock.
func newVerifier(tb testing.TB, clock *clocktest.Clock, fetch clientauth.FetchOptions) *clientauth.Verifier {
	tb.Helper()
	return newVerifierOn(tb, clock, fetch, dpop.NewMemoryReplay())
}

func newVerifierOn(tb testing.TB, clock *clocktest.Clock, fetch clientauth.FetchOptions, replay clientauth.ReplayCache) *clientauth.Verifier {
	tb.Helper()
	v, err := clientauth.New(clientauth.Options{Audiences: []string{issuer, endpoint}, Replay: replay, Now: clock.Now, Fetch: fetch})
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// newFetcher is clientauth.NewFetcher(opts), which must succeed.
func newFetcher(t testing.TB, opts clientauth.FetchOptions) *clientauth.Fetcher {
	t.Helper()
	f, err := clientauth.NewFetcher(opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
