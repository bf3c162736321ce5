package clientauth_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/token/clientauth"
)

// FuzzParseJWKS: any input parses to a set of usable public keys or is an
// error of ours; never a panic, never an empty set.
func FuzzParseJWKS(f *testing.F) {
	ed := newSigner(f, clientauth.AlgEdDSA, "ed")
	es := newSigner(f, clientauth.AlgES256, "es")
	rs := newSigner(f, clientauth.AlgRS256, "rs")
	f.Add(jwks(f, ed, es, rs))
	f.Add([]byte(`{"keys":[{"kty":"oct","k":"AA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"` + "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo" + `"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ks, err := clientauth.ParseJWKS(data)
		if err != nil {
			if !errors.Is(err, clientauth.ErrJWKS) && !errors.Is(err, clientauth.ErrPrivateKey) {
				t.Fatalf("error not ours: %v", err)
			}
			return
		}
		if ks.Len() == 0 || ks.Len() > clientauth.MaxKeys {
			t.Fatalf("%d keys", ks.Len())
		}
	})
}

// FuzzVerify: any assertion is accepted only if signed by the client's key
// (the seeds hold one that is), else refused with an error of ours; its
// unverified sub (Subject) is read or refused likewise.
func FuzzVerify(f *testing.F) {
	ed := newSigner(f, clientauth.AlgEdDSA, "ed")
	es := newSigner(f, clientauth.AlgES256, "es")
	good := ed.sign(f, claimsFor("gw"))
	f.Add(good)
	f.Add(es.sign(f, claimsFor("gw")))
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJndyJ9.")
	f.Add("a.b.c")
	f.Add("")
	clock := clocktest.New(t0)
	ks := keySet(f, ed, es)
	ours := []error{clientauth.ErrTooLarge, clientauth.ErrMalformed, clientauth.ErrAlgorithm, clientauth.ErrUnknownKey,
		clientauth.ErrWrongKey, clientauth.ErrSignature, clientauth.ErrClaims, clientauth.ErrReplayed}
	f.Fuzz(func(t *testing.T, assertion string) {
		// Subject runs before the client is known (no client_id): only
		// errors of ours, never a panic.
		if _, err := clientauth.Subject(assertion); err != nil && !errors.Is(err, clientauth.ErrTooLarge) &&
			!errors.Is(err, clientauth.ErrMalformed) && !errors.Is(err, clientauth.ErrClaims) {
			t.Fatalf("Subject: error not ours: %v", err)
		}
		v := newVerifier(t, clock, clientauth.FetchOptions{}) // a fresh replay record: good is accepted each time
		err := v.Verify(t.Context(), clientauth.Registration{ClientID: "gw", Keys: ks}, assertion)
		if err == nil {
			return // a signed assertion of a seed, or the fuzzer found our key: only the seeds can be
		}
		for _, e := range ours {
			if errors.Is(err, e) {
				return
			}
		}
		t.Fatalf("error not ours: %v", err)
	})
}

// FuzzVerifySubjectToken: any subject token is accepted only if signed by
// its trusted issuer's key (the seeds hold one that is) with its claims in
// bounds, else refused with an error of ours.
func FuzzVerifySubjectToken(f *testing.F) {
	ed := newSigner(f, clientauth.AlgEdDSA, "ed")
	set := jwks(f, ed)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(set) }))
	f.Cleanup(srv.Close)
	trusted := []clientauth.TrustedIssuer{{Issuer: "https://k8s.example", JWKSURI: srv.URL + "/jwks"}}
	good := jwt.MapClaims{"iss": trusted[0].Issuer, "sub": "system:serviceaccount:shop:orders", "aud": "orders", "scope": "read",
		"iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix(), "may_act": map[string]any{"sub": "billing"}}
	f.Add(ed.sign(f, good))
	f.Add(ed.sign(f, jwt.MapClaims{"iss": trusted[0].Issuer, "sub": "x", "aud": "orders", "exp": t0.Add(time.Hour).Unix()}))
	f.Add("eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwczovL2s4cy5leGFtcGxlIn0.")
	f.Add("a.b.c")
	v := newVerifier(f, clocktest.New(t0), clientauth.FetchOptions{})
	ours := []error{clientauth.ErrTooLarge, clientauth.ErrMalformed, clientauth.ErrAlgorithm, clientauth.ErrUnknownKey,
		clientauth.ErrWrongKey, clientauth.ErrSignature, clientauth.ErrClaims}
	f.Fuzz(func(t *testing.T, raw string) {
		st, err := v.VerifySubjectToken(t.Context(), trusted, "orders", raw)
		if err == nil {
			if st.Issuer != trusted[0].Issuer || st.Subject == "" || st.ExpiresAt.Before(t0) {
				t.Fatalf("accepted %+v", st)
			}
			return
		}
		for _, e := range ours {
			if errors.Is(err, e) {
				return
			}
		}
		t.Fatalf("error not ours: %v", err)
	})
}
