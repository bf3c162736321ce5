package main

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/token/clientauth"
)

// The private_key_jwt row: tokens issued to a client that
// authenticates with a client assertion (RFC 7523 §2.2) signed by its
// Ed25519 key, registered inline (jwks) in the clients file, instead of a
// secret. Each request carries an assertion of its own, as a client makes
// them (a fresh jti, iat now, exp assertionLifetime later, aud the issuer's
// identifier), from a pool made before each run, unmeasured (pool.go), as
// the DPoP rows' proofs. Its floor is the secret-based JWT issue row of the
// same round plus one Ed25519 verification (floor.go); it runs one Redis
// command more than that row, the jti's SET NX (redisstore.Replays).

// Assertion client: its ID in the clients file and its key's kid.
const (
	assertionClient = "bench-key"
	assertionKID    = "bench-key-1"
)

// assertionLifetime is each assertion's exp − iat: a short one, as client
// libraries make them, well within the issuer's 5 min
// (clientauth.Options.MaxLifetime). A pool must be used up before its
// oldest assertion expires (makeFresh).
const assertionLifetime = time.Minute

// keyClient makes the clients-file entry of client id, which authenticates
// by private_key_jwt with k, its kid assertionKID, by the issuer's own
// `client new -jwks-file` (the key set written to a file under dir).
func keyClient(issuerBin, dir, id string, k *proofKey) (string, error) {
	set, err := k.jwks()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, id+".jwks.json")
	if err := os.WriteFile(path, set, 0o600); err != nil {
		return "", err
	}
	out, err := exec.Command(issuerBin, "client", "new", "-id", id, "-scopes", "read,write", "-jwks-file", path).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("client new -jwks-file: %v: %s", err, out)
	}
	entry := entryLine(out)
	if entry == "" {
		return "", fmt.Errorf("unexpected client new output: %s", out)
	}
	return entry, nil
}

// jwks is the JWK Set of k's public key, its kid assertionKID.
func (k *proofKey) jwks() ([]byte, error) {
	jwk := maps.Clone(k.jwk)
	jwk["kid"] = assertionKID
	return json.Marshal(map[string]any{"keys": []any{jwk}})
}

// assertion is a client assertion by k for client id at now, to aud.
func (k *proofKey) assertion(id, aud string, now time.Time) (string, error) {
	t := jwt.NewWithClaims(k.method, jwt.MapClaims{"iss": id, "sub": id, "aud": aud, "jti": rand.Text(),
		"iat": now.Unix(), "exp": now.Add(assertionLifetime).Unix()})
	t.Header["kid"] = assertionKID
	return t.SignedString(k.priv)
}

// assertionRequest is POST /token with the client credentials grant for
// scope read, as client id by a client assertion, less the assertion: it
// goes at the end of the body (assertionSlot).
func assertionRequest(id string) httpReq {
	body := url.Values{"grant_type": {"client_credentials"}, "scope": {"read"}, "client_id": {id},
		"client_assertion_type": {clientauth.AssertionType}}.Encode()
	return httpReq{method: "POST", path: "/token", body: body,
		header: [][2]string{{"Content-Type", "application/x-www-form-urlencoded"}}}
}

// assertionSlot is where an assertion goes in assertionRequest (a JWT is
// URL-safe: no escaping).
var assertionSlot = slot{prefix: "&client_assertion="}

// assertionSource is k's assertions for client id to aud, in
// assertionRequest, its wrk pool sized from the rows sizedBy, profiled
// under -pprof.
func (k *proofKey) assertionSource(id, aud string, sizedBy ...string) *freshSource {
	return &freshSource{req: assertionRequest(id), slot: assertionSlot, sizedBy: sizedBy, profile: true,
		values: func(n int, d time.Duration) ([]string, error) {
			return makeFresh("client assertions", n, d, assertionLifetime, func(now time.Time) (string, error) {
				return k.assertion(id, aud, now)
			})
		}}
}

// assertionName is the private_key_jwt row's name.
const assertionName = "private_key_jwt issue (EdDSA assertion)"

// assertionEndpoint is the private_key_jwt row: client assertionClient, its
// key k, each assertion's aud the issuer's identifier alone, the public URL
// the load tool starts it with (SNOWTOKEN_ISSUER: the issuer refuses the
// token endpoint's URL, see clientauth); its pool is
// sized from the secret-based issue row jwtIssue, whose figures its floor
// counts. It issues one token first, so that a client the issuer refuses
// fails the run with the issuer's answer.
func (s servers) assertionEndpoint(k *proofKey, jwtIssue string) (endpoint, error) {
	src := k.assertionSource(assertionClient, s.issuerURL, jwtIssue)
	one, err := src.values(1, 0)
	if err != nil {
		return endpoint{}, err
	}
	req := assertionSlot.fill(src.req, one[0])
	resp, err := httpClient.Post(s.issuerURL+req.path, "application/x-www-form-urlencoded", strings.NewReader(req.body))
	if err != nil {
		return endpoint{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return endpoint{}, fmt.Errorf("POST /token with a client assertion: %s: %s", resp.Status, b)
	}
	return endpoint{name: assertionName, url: s.issuerURL, req: src.req, pid: s.issuerPid, redis: s.redisPid,
		floor: floorIssueVerify, target: 1.3, fresh: src}, nil
}
