package clientauth_test

import (
	"errors"
	"testing"

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
