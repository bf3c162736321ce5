package e2e

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// DPoP (RFC 9449) between the real program and a client that shares no code
// with it (interoperability with other stacks): every proof here is made
// with go-jose, the way a client of another stack makes them, signed by a
// key whose public half go-jose embeds (EmbedJWK); none goes through
// client/dpop. Two replicas on one Redis: a proof is accepted once across
// both.

// dpopChallenge is the WWW-Authenticate of a DPoP refusal at validation.
func dpopChallenge(code string) string {
	return `DPoP realm="snowtoken", algs="EdDSA ES256", error="` + code + `"`
}

// joseKey is a DPoP client's key, with go-jose's view of its public half.
type joseKey struct {
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
	pub  jose.JSONWebKey
}

func newJoseKey(tb testing.TB, alg jose.SignatureAlgorithm) *joseKey {
	tb.Helper()
	var priv crypto.Signer
	var err error
	switch alg {
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		tb.Fatalf("no key for %s", alg)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return &joseKey{alg: alg, priv: priv, pub: jose.JSONWebKey{Key: priv.Public()}}
}

// thumbprint is the key's RFC 7638 thumbprint as go-jose computes it: the
// cnf.jkt a token bound to it must carry.
func (k *joseKey) thumbprint(tb testing.TB) string {
	tb.Helper()
	t, err := k.pub.Thumbprint(crypto.SHA256)
	if err != nil {
		tb.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(t)
}

// claims are a proof's claims of a request of method to htu, with the hash
// of tok (none: no ath), made now with a fresh jti.
func claims(method, htu, tok string) map[string]any {
	c := map[string]any{"jti": rand.Text(), "htm": method, "htu": htu, "iat": time.Now().Unix()}
	if tok != "" {
		sum := sha256.Sum256([]byte(tok))
		c["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return c
}

// sign is a compact JWS of c by go-jose with key under alg, typ dpop+jwt,
// and opts's other headers.
func sign(tb testing.TB, alg jose.SignatureAlgorithm, key any, opts *jose.SignerOptions, c map[string]any) string {
	tb.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts.WithType("dpop+jwt"))
	if err != nil {
		tb.Fatal(err)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		tb.Fatal(err)
	}
	jws, err := s.Sign(payload)
	if err != nil {
		tb.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// proof is k's proof of a request of method to htu presenting tok.
func (k *joseKey) proof(tb testing.TB, method, htu, tok string) string {
	tb.Helper()
	return sign(tb, k.alg, k.priv, &jose.SignerOptions{EmbedJWK: true}, claims(method, htu, tok))
}

// noneProof is a proof with k's jwk, alg none and no signature, as go-jose
// refuses to make one.
func (k *joseKey) noneProof(tb testing.TB, method, htu, tok string) string {
	tb.Helper()
	h, err := json.Marshal(map[string]any{"typ": "dpop+jwt", "alg": "none", "jwk": k.pub})
	if err != nil {
		tb.Fatal(err)
	}
	c, _ := json.Marshal(claims(method, htu, tok))
	b64 := base64.RawURLEncoding
	return b64.EncodeToString(h) + "." + b64.EncodeToString(c) + "."
}

// hmacProof is a proof with k's jwk MACed with HS256 keyed with the public
// key's bytes, which anyone can read from the jwk (k is an EdDSA key).
func (k *joseKey) hmacProof(tb testing.TB, method, htu, tok string) string {
	tb.Helper()
	pub := []byte(k.pub.Key.(ed25519.PublicKey))
	return sign(tb, jose.HS256, pub, (&jose.SignerOptions{}).WithHeader("jwk", k.pub), claims(method, htu, tok))
}

// answer is a response: status, body as a JSON object, headers.
type answer struct {
	status int
	body   map[string]any
	header http.Header
}

// send sends a request with hdr through client and reads the answer.
func send(tb testing.TB, client *http.Client, method, u, body string, hdr http.Header) answer {
	tb.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header = hdr
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(b, &a.body); err != nil {
		tb.Fatalf("%s %s: %d, body not a JSON object: %s", method, u, resp.StatusCode, b)
	}
	return a
}

// issueWithProof asks p for a token for c with proof in the DPoP header.
func issueWithProof(tb testing.TB, p *issuer, c fleetClient, proof string) answer {
	tb.Helper()
	basic := base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(c.id) + ":" + url.QueryEscape(c.secret)))
	hdr := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Authorization": {"Basic " + basic}, "Dpop": {proof}}
	return send(tb, fleetHTTP, http.MethodPost, p.url("/token"), "grant_type=client_credentials", hdr)
}

// boundToken issues a token for c bound to k at p, and checks that it came
// as token_type DPoP.
func (k *joseKey) boundToken(tb testing.TB, p *issuer, c fleetClient) string {
	tb.Helper()
	a := issueWithProof(tb, p, c, k.proof(tb, http.MethodPost, fleetIssuer+"/token", ""))
	if a.status != http.StatusOK || a.body["token_type"] != "DPoP" {
		tb.Fatalf("POST /token with a %s proof: %d %v, want 200 and token_type DPoP", k.alg, a.status, a.body)
	}
	return a.body["access_token"].(string)
}

// validate calls GET /token/validate at p through client with tok under
// scheme, proof (none: no DPoP header) and extra headers.
func validate(tb testing.TB, client *http.Client, p *issuer, scheme, tok, proof string, extra http.Header) answer {
	tb.Helper()
	hdr := http.Header{"Authorization": {scheme + " " + tok}}
	if proof != "" {
		hdr["Dpop"] = []string{proof}
	}
	for k, v := range extra {
		hdr[k] = v
	}
	return send(tb, client, http.MethodGet, p.url("/token/validate"), "", hdr)
}

// wantRefused checks a refusal: status and error code, and at validation
// (challenge) the DPoP challenge of RFC 9449 §7.1.
func wantRefused(tb testing.TB, a answer, status int, code string, challenge bool) {
	tb.Helper()
	if a.status != status || a.body["error"] != code {
		tb.Errorf("got %d %v, want %d %s", a.status, a.body, status, code)
	}
	if got := a.header.Get("WWW-Authenticate"); challenge && got != dpopChallenge(code) {
		tb.Errorf("WWW-Authenticate %q, want %q", got, dpopChallenge(code))
	}
}

// TestDPoPInterop: go-jose's proofs, EdDSA and ES256, are accepted at POST
// /token and GET /token/validate of the real program, the token bound to
// the thumbprint go-jose computes; a replayed proof (at one replica and
// across two), a proof of another URL or method, by another key, alg none,
// HS256 and a bound token sent as Bearer are each refused, with a DPoP
// challenge at validation; and a gateway's forwarded request, from a
// DPoP forwarder only, is what the proof is checked against: replica a
// lists the gateway in SNOWTOKEN_TRUSTED_PROXIES alone (SNOWTOKEN_DPOP_FORWARDERS
// unset: the forwarders are the trusted proxies, as before the two were
// apart), b in SNOWTOKEN_DPOP_FORWARDERS alone.
func TestDPoPInterop(t *testing.T) {
	bin := fleetBinary(t)
	redisURL, _ := fleetRedis(t)
	creds := newFleetCreds(t, bin)
	rv := map[string]string{"SNOWTOKEN_REDIS_URL": redisURL}
	// Two replicas, both believing the forwarded requests of 127.0.0.1
	// (where this test's requests come from) as a gateway's; launched
	// together, they wait their first lease TTL at once.
	a := fleet{bin, creds}.launch(t, replica{name: "a", ip: "127.0.0.61", redis: rv, env: []string{"SNOWTOKEN_TRUSTED_PROXIES", "127.0.0.1"}})
	b := fleet{bin, creds}.launch(t, replica{name: "b", ip: "127.0.0.62", redis: rv, env: []string{"SNOWTOKEN_DPOP_FORWARDERS", "127.0.0.1"}})
	for _, p := range []*issuer{a, b} {
		p.waitLog(t, "listening")
		waitReady(t, p.url("/readyz"), fleetWait)
	}
	validateURL, tokenURL := fleetIssuer+"/token/validate", fleetIssuer+"/token"

	for _, alg := range []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256} {
		t.Run("accepted "+string(alg), func(t *testing.T) {
			k := newJoseKey(t, alg)
			tok := k.boundToken(t, a, creds.svc)
			for _, p := range []*issuer{a, b} {
				r := validate(t, fleetHTTP, p, "DPoP", tok, k.proof(t, http.MethodGet, validateURL, tok), nil)
				cnf, _ := r.body["cnf"].(map[string]any)
				if r.status != http.StatusOK || cnf["jkt"] != k.thumbprint(t) {
					t.Errorf("validate at %s: %d %v, want 200 and cnf.jkt %s", p.name, r.status, r.body, k.thumbprint(t))
				}
			}
		})
	}

	k, other, stranger := newJoseKey(t, jose.EdDSA), newJoseKey(t, jose.ES256), newJoseKey(t, jose.EdDSA)
	tok := k.boundToken(t, a, creds.svc)
	invalidProof := func(t *testing.T, r answer) {
		t.Helper()
		wantRefused(t, r, http.StatusUnauthorized, "invalid_dpop_proof", true)
	}
	atValidation := map[string]func(t *testing.T){
		"replayed at the same replica": func(t *testing.T) {
			proof := k.proof(t, http.MethodGet, validateURL, tok)
			if r := validate(t, fleetHTTP, a, "DPoP", tok, proof, nil); r.status != http.StatusOK {
				t.Fatalf("first use: %d %v", r.status, r.body)
			}
			invalidProof(t, validate(t, fleetHTTP, a, "DPoP", tok, proof, nil))
		},
		"replayed at another replica": func(t *testing.T) {
			proof := k.proof(t, http.MethodGet, validateURL, tok)
			if r := validate(t, fleetHTTP, a, "DPoP", tok, proof, nil); r.status != http.StatusOK {
				t.Fatalf("first use: %d %v", r.status, r.body)
			}
			invalidProof(t, validate(t, fleetHTTP, b, "DPoP", tok, proof, nil))
		},
		"another URL": func(t *testing.T) {
			invalidProof(t, validate(t, fleetHTTP, a, "DPoP", tok, k.proof(t, http.MethodGet, fleetIssuer+"/token/introspect", tok), nil))
		},
		"another method": func(t *testing.T) {
			invalidProof(t, validate(t, fleetHTTP, a, "DPoP", tok, k.proof(t, http.MethodPost, validateURL, tok), nil))
		},
		"another key than the token's": func(t *testing.T) {
			invalidProof(t, validate(t, fleetHTTP, a, "DPoP", tok, other.proof(t, http.MethodGet, validateURL, tok), nil))
		},
		"alg none": func(t *testing.T) {
			invalidProof(t, validate(t, fleetHTTP, a, "DPoP", tok, k.noneProof(t, http.MethodGet, validateURL, tok), nil))
		},
		"HS256 keyed with the public key": func(t *testing.T) {
			invalidProof(t, validate(t, fleetHTTP, a, "DPoP", tok, k.hmacProof(t, http.MethodGet, validateURL, tok), nil))
		},
		"bound token stripped to Bearer": func(t *testing.T) {
			wantRefused(t, validate(t, fleetHTTP, a, "Bearer", tok, "", nil), http.StatusUnauthorized, "invalid_token", true)
		},
		"bound token as Bearer with a good proof": func(t *testing.T) {
			r := validate(t, fleetHTTP, a, "Bearer", tok, k.proof(t, http.MethodGet, validateURL, tok), nil)
			wantRefused(t, r, http.StatusUnauthorized, "invalid_token", true)
		},
	}
	for name, check := range atValidation {
		t.Run("validation refuses: "+name, check)
	}

	// At the token endpoint a refused proof is a 400 invalid_dpop_proof
	// (RFC 9449 §5), and no token comes out.
	badRequest := func(t *testing.T, proof string) {
		t.Helper()
		r := issueWithProof(t, a, creds.svc, proof)
		wantRefused(t, r, http.StatusBadRequest, "invalid_dpop_proof", false)
		if _, ok := r.body["access_token"]; ok {
			t.Errorf("a token came with the refusal: %v", r.body)
		}
	}
	atIssue := map[string]func(t *testing.T){
		"replayed at another replica": func(t *testing.T) {
			proof := k.proof(t, http.MethodPost, tokenURL, "")
			if r := issueWithProof(t, a, creds.svc, proof); r.status != http.StatusOK {
				t.Fatalf("first use: %d %v", r.status, r.body)
			}
			r := issueWithProof(t, b, creds.svc, proof)
			wantRefused(t, r, http.StatusBadRequest, "invalid_dpop_proof", false)
		},
		"another URL":    func(t *testing.T) { badRequest(t, k.proof(t, http.MethodPost, "https://elsewhere.test/token", "")) },
		"another method": func(t *testing.T) { badRequest(t, k.proof(t, http.MethodGet, tokenURL, "")) },
		"signed by another key than its jwk": func(t *testing.T) {
			badRequest(t, sign(t, stranger.alg, stranger.priv, (&jose.SignerOptions{}).WithHeader("jwk", k.pub), claims(http.MethodPost, tokenURL, "")))
		},
		"alg none": func(t *testing.T) { badRequest(t, k.noneProof(t, http.MethodPost, tokenURL, "")) },
		"HS256 keyed with the public key": func(t *testing.T) {
			badRequest(t, k.hmacProof(t, http.MethodPost, tokenURL, ""))
		},
	}
	for name, check := range atIssue {
		t.Run("token endpoint refuses: "+name, check)
	}

	// A gateway in front of an API calls GET /token/validate with the
	// original request in X-Forwarded-*: the proof names that request.
	const api = "https://api.example.test/orders/17"
	fwd := http.Header{"X-Forwarded-Method": {"PATCH"}, "X-Forwarded-Proto": {"https"},
		"X-Forwarded-Host": {"api.example.test"}, "X-Forwarded-Uri": {"/orders/17?expand=lines"}}
	t.Run("gateway: the original request, from a DPoP forwarder", func(t *testing.T) {
		for _, p := range []*issuer{a, b} {
			if r := validate(t, fleetHTTP, p, "DPoP", tok, k.proof(t, http.MethodPatch, api, tok), fwd); r.status != http.StatusOK {
				t.Errorf("at %s: %d %v, want 200", p.name, r.status, r.body)
			}
			// The validation URL is not the request the gateway forwards.
			invalidProof(t, validate(t, fleetHTTP, p, "DPoP", tok, k.proof(t, http.MethodGet, validateURL, tok), fwd))
		}
	})
	t.Run("gateway: forwarded headers from an untrusted peer are ignored", func(t *testing.T) {
		// The same call from 127.0.0.2, which the replicas do not trust.
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: fleetWait}
		untrusted := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext}}
		invalidProof(t, validate(t, untrusted, b, "DPoP", tok, k.proof(t, http.MethodPatch, api, tok), fwd))
		if r := validate(t, untrusted, b, "DPoP", tok, k.proof(t, http.MethodGet, validateURL, tok), fwd); r.status != http.StatusOK {
			t.Errorf("the validation URL itself: %d %v, want 200", r.status, r.body)
		}
	})
}
