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
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/client/dpop"
)

// DPoP rows (issue 28): a DPoP-bound token validated again and again (hot),
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

// makeProofs makes n proofs by k of method to htu for token, on every core,
// and fails if making them took so long that the oldest could age past the
// issuer's window before a run of d ends.
func (k *proofKey) makeProofs(n int, method, htu, token string, d time.Duration) ([]string, error) {
	start := time.Now()
	proofs := make([]string, n)
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n && errs[w] == nil; i += workers {
				proofs[i], errs[w] = k.proof(method, htu, token, time.Now())
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	// The slack is for loading the pool into wrk and for the clocks.
	if age := time.Since(start) + d + 10*time.Second; age > dpop.DefaultMaxAge {
		return nil, fmt.Errorf("dpop: %d proofs took %v to make: the oldest would be %v old at the run's end, past the issuer's %v",
			n, time.Since(start).Round(time.Second), age.Round(time.Second), dpop.DefaultMaxAge)
	}
	return proofs, nil
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

// proofSource is what an endpoint's proofs are: by key, of method to
// htu, for token (none at the token endpoint); req is the request they go
// with, in its DPoP header.
type proofSource struct {
	key                *proofKey
	method, htu, token string
	req                httpReq
	// sizedBy names the rows measured before this one in each round whose
	// requests/s bound its own, to size its wrk pool (pool.go).
	sizedBy []string
}

// pool is the wrk pool of src's proofs for row r, sized from refs.
func (src *proofSource) pool(dir string, r *row, refs []*row) *row {
	name := strings.NewReplacer(" ", "-", "/", "", ",", "", "(", "", ")", "").Replace(r.name)
	if src.token != "" {
		r.profile = name // a validation
	}
	return poolRow(dir, r, &freshPool{name: name, req: src.req, header: "DPoP", refs: refs,
		values: func(_, n int) ([]string, error) {
			return src.key.makeProofs(n, src.method, src.htu, src.token, *duration)
		}})
}

// ratePath sets path to send, in each round of the constant-rate table,
// a proof of its own with every request, made before the round's run.
func (src *proofSource) ratePath(path *loadPath) {
	var raw [][]byte
	path.prepare = func(int) error {
		proofs, err := src.key.makeProofs(int(rateFor.Seconds()*float64(*rate)), src.method, src.htu, src.token, *rateFor)
		if err != nil {
			return err
		}
		raw = make([][]byte, len(proofs))
		for i, p := range proofs {
			req := src.req
			req.header = append(req.header[:len(req.header):len(req.header)], [2]string{"DPoP", p})
			raw[i] = []byte(req.raw())
		}
		return nil
	}
	path.request = func(_, i int) []byte { return raw[i] }
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
			proofs: &proofSource{key: k, method: "GET", htu: validate, token: tok, req: req, sizedBy: []string{ref}}})
		ref = name
	}
	k, err := newProofKey("EdDSA")
	if err != nil {
		return nil, err
	}
	req := issueRequest(s.basic)
	eps = append(eps, endpoint{name: "POST /token (JWT), DPoP, fresh EdDSA proof", url: s.issuerURL, req: req, pid: s.issuerPid,
		redis: s.redisPid, floor: floorSignAndProof,
		proofs: &proofSource{key: k, method: "POST", htu: s.issuerURL + "/token", req: req, sizedBy: []string{jwtIssue}}})
	return eps, nil
}
