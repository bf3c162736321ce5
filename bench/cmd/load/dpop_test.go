package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/dpop"
)

// TestMakeProofs: the load tool's proofs, of either algorithm, pass the
// issuer's own checker for the request they name, each once, each with a
// jti of its own; a pool too slow to stay within the issuer's window is an
// error.
func TestMakeProofs(t *testing.T) {
	const htu, tok = "http://127.0.0.1:1/token/validate", "eyJ.a.token"
	for _, alg := range []string{"EdDSA", "ES256"} {
		t.Run(alg, func(t *testing.T) {
			k, err := newProofKey(alg)
			if err != nil {
				t.Fatal(err)
			}
			proofs, err := k.makeProofs(20, "GET", htu, tok, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			c, err := dpop.New(dpop.Options{})
			if err != nil {
				t.Fatal(err)
			}
			req := dpop.Request{Method: "GET", URL: htu, AccessToken: tok}
			jtis := map[string]bool{}
			for i, p := range proofs {
				got, err := c.Check(t.Context(), p, req, time.Now())
				if err != nil {
					t.Fatalf("proof %d: %v", i, err)
				}
				if got.Algorithm != alg || jtis[got.JTI] {
					t.Errorf("proof %d: alg %s, jti %s seen before: %v", i, got.Algorithm, got.JTI, jtis[got.JTI])
				}
				jtis[got.JTI] = true
			}
			if _, err := c.Check(t.Context(), proofs[0], req, time.Now()); !errors.Is(err, dpop.ErrReplay) {
				t.Errorf("a proof sent twice: %v, want ErrReplay", err)
			}
			if _, err := k.makeProofs(1, "GET", htu, tok, dpop.DefaultMaxAge); err == nil {
				t.Error("proofs for a run as long as the issuer's window: no error")
			}
		})
	}
}

// TestRatePath: each constant-rate request carries the request's own
// headers and a proof of its own, made by prepare.
func TestRatePath(t *testing.T) {
	k, err := newProofKey("EdDSA")
	if err != nil {
		t.Fatal(err)
	}
	req := httpReq{method: "GET", path: "/token/validate", header: [][2]string{{"Authorization", "DPoP tok"}}}
	src := k.source("GET", "http://x/token/validate", "tok", req)
	oldRate, oldFor := *rate, *rateFor
	*rate, *rateFor = 50, 2*time.Second // 100 proofs a round
	t.Cleanup(func() { *rate, *rateFor = oldRate, oldFor })
	path := &loadPath{}
	src.ratePath(path)
	if err := path.prepare(0); err != nil {
		t.Fatal(err)
	}
	n := int(rateFor.Seconds() * float64(*rate))
	seen := map[string]bool{}
	for _, i := range []int{0, 1, n - 1} {
		raw := string(path.request(0, i))
		_, proof, ok := strings.Cut(raw, "\r\nDPoP: ")
		proof, _, _ = strings.Cut(proof, "\r\n")
		if !strings.HasPrefix(raw, "GET /token/validate HTTP/1.1\r\n") || !strings.Contains(raw, "\r\nAuthorization: DPoP tok\r\n") || !ok || seen[proof] {
			t.Errorf("request %d: %q", i, raw)
		}
		seen[proof] = true
	}
	if len(req.header) != 1 {
		t.Errorf("ratePath changed the endpoint's request: %v", req.header)
	}
}
