package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/dpop"
)

// DPoP rows: a DPoP-bound token validated again and again (hot),
// each request with a proof of its own, as a client sends them (a fresh
// jti, iat now, ath the hash of the token), once with an Ed25519 key and
// once with a P-256 one; and tokens issued against a proof. Their floors
// are the bare handler plus one verification of the proof's algorithm, and
// plus a signature too for an issue (floor.go).
//
// wrk replays one request, so the proofs come from a pool made before each
// run, unmeasured (pool.go): signing them is the client's work, and made
// during the run it would take the cores from the server it measures. Each
// proof is used once, and the oldest is younger than its run plus the time
// the pool took to make, which makeProofs keeps well within the issuer's
// 60 s (dpop.DefaultMaxAge). The constant-rate table sends a pool of its
// own, one proof a request, made before each run the same way.

// dpopCommands is the bound on Redis commands per DPoP validation: one SET
// NX PX a proof (redisstore.Proofs), and the hot validation's hotCommands.
const dpopCommands = 1 + hotCommands

// proofKey is a DPoP client's key; its proofs are made with golang-jwt, a
// library independent of the issuer's checker.
type proofKey struct {
	method jwt.SigningMethod
	priv   crypto.Signer
	jwk    map[string]any
}

// newProofKey makes a key for alg, "EdDSA" or "ES256".
func newProofKey(alg string) (*proofKey, error) {
	b64 := base64.RawURLEncoding
	switch alg {
	case "EdDSA":
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		return &proofKey{method: jwt.SigningMethodEdDSA, priv: priv,
			jwk: map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64.EncodeToString(pub)}}, nil
	case "ES256":
		priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		raw, err := priv.PublicKey.Bytes() // 0x04 || x || y
		if err != nil {
			return nil, err
		}
		return &proofKey{method: jwt.SigningMethodES256, priv: priv,
			jwk: map[string]any{"kty": "EC", "crv": "P-256", "x": b64.EncodeToString(raw[1:33]), "y": b64.EncodeToString(raw[33:])}}, nil
	}
	return nil, fmt.Errorf("dpop: no key for alg %q", alg)
}

// proof is a proof by k of a request of method to htu at now, for token
// (none: no ath).
func (k *proofKey) proof(method, htu, token string, now time.Time) (string, error) {
	c := jwt.MapClaims{"jti": rand.Text(), "htm": method, "htu": htu, "iat": now.Unix()}
	if token != "" {
		c["ath"] = dpop.AccessTokenHash(token)
	}
	t := jwt.NewWithClaims(k.method, c)
	t.Header["typ"] = dpop.Typ
	t.Header["jwk"] = k.jwk
	return t.SignedString(k.priv)
}

// makeProofs makes n proofs by k of method to htu for token (makeFresh),
// and fails if making them took so long that the oldest could age past the
// issuer's window before a run of d ends.
func (k *proofKey) makeProofs(n int, method, htu, token string, d time.Duration) ([]string, error) {
	return makeFresh("dpop proofs", n, d, dpop.DefaultMaxAge, func(now time.Time) (string, error) {
		return k.proof(method, htu, token, now)
	})
}

// source is k's proofs of method to htu for token (none at the token
// endpoint) in req's DPoP header, its wrk pool sized from the rows sizedBy;
// the rows of a validation are profiled under -pprof.
func (k *proofKey) source(method, htu, token string, req httpReq, sizedBy ...string) *freshSource {
	return &freshSource{req: req, slot: slot{header: "DPoP"}, sizedBy: sizedBy, profile: token != "",
		values: func(n int, d time.Duration) ([]string, error) { return k.makeProofs(n, method, htu, token, d) }}
}

// issueBound issues a token to client basic bound to k by a proof of POST
// /token, and checks that it came as token_type DPoP.
func issueBound(issuerURL, basic string, k *proofKey) (string, error) {
	proof, err := k.proof(http.MethodPost, issuerURL+"/token", "", time.Now())
	if err != nil {
		return "", err
	}
	req := issueRequest(basic)
	hreq, err := http.NewRequest(req.method, issuerURL+req.path, strings.NewReader(req.body))
	if err != nil {
		return "", err
	}
	for _, h := range append(req.header, [2]string{"DPoP", proof}) {
		hreq.Header.Set(h[0], h[1])
	}
	resp, err := httpClient.Do(hreq)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST /token with a DPoP proof: %s: %s", resp.Status, b)
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return "", err
	}
	if body.TokenType != "DPoP" {
		return "", fmt.Errorf("POST /token with a DPoP proof: token_type %q, want DPoP", body.TokenType)
	}
	return body.AccessToken, nil
}

// dpopEndpoints are the DPoP rows: hot validation of a bound token with a
// fresh EdDSA proof, then an ES256 one, and an issue with a fresh EdDSA
// proof; each proof's request under the issuer's public URL, which the
// load tool starts it with (SNOWTOKEN_ISSUER).
func (s servers) dpopEndpoints(neverSeen, jwtIssue string) ([]endpoint, error) {
	var eps []endpoint
	validate := s.issuerURL + "/token/validate"
	ref := neverSeen // the first row is sized from the never-seen one
	for _, alg := range []string{"EdDSA", "ES256"} {
		k, err := newProofKey(alg)
		if err != nil {
			return nil, err
		}
		tok, err := issueBound(s.issuerURL, s.basic, k)
		if err != nil {
			return nil, err
		}
		req := httpReq{method: "GET", path: "/token/validate", header: [][2]string{{"Authorization", "DPoP " + tok}}}
		floor := floorVerify
		if alg == "ES256" {
			floor = floorVerifyES256
		}
		name := "GET /token/validate, DPoP, fresh " + alg + " proof" // the token hot
		eps = append(eps, endpoint{name: name, url: s.issuerURL, req: req, pid: s.issuerPid, redis: s.redisPid,
			floor: floor, target: 1.3, cmdsTarget: dpopCommands,
			fresh: k.source("GET", validate, tok, req, ref)})
		ref = name
	}
	k, err := newProofKey("EdDSA")
	if err != nil {
		return nil, err
	}
	req := issueRequest(s.basic)
	eps = append(eps, endpoint{name: "POST /token (JWT), DPoP, fresh EdDSA proof", url: s.issuerURL, req: req, pid: s.issuerPid,
		redis: s.redisPid, floor: floorSignAndProof,
		fresh: k.source("POST", s.issuerURL+"/token", "", req, jwtIssue)})
	return eps, nil
}
