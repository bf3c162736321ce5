package clientauth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"math/big"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/snowtoken/snowtoken/token/clientauth"
)

// TestParseJWKS: what a key set may hold, and what refuses it whole.
func TestParseJWKS(t *testing.T) {
	ed := newSigner(t, clientauth.AlgEdDSA, "ed")
	es := newSigner(t, clientauth.AlgES256, "es")
	rs := newSigner(t, clientauth.AlgRS256, "rs")
	edJWK := string(ed.jwk(t))
	private := func() string {
		b, _ := jose.JSONWebKey{Key: ed.priv, KeyID: "p"}.MarshalJSON()
		return string(b)
	}()
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	smallJWK, _ := jose.JSONWebKey{Key: &small.PublicKey, KeyID: "small"}.MarshalJSON()
	// A modulus of 8200 bits (its primes need not be: only n is read);
	// go-jose refuses it as well.
	huge := &rsa.PublicKey{N: new(big.Int).Lsh(big.NewInt(1), 8199), E: 65537}
	huge.N.Add(huge.N, big.NewInt(1))
	hugeJWK, _ := jose.JSONWebKey{Key: huge, KeyID: "huge"}.MarshalJSON()
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384JWK, _ := jose.JSONWebKey{Key: &p384.PublicKey, KeyID: "p384"}.MarshalJSON()
	tests := []struct {
		name string
		doc  string
		want error // nil: accepted
		keys int
	}{
		{"three algorithms", string(jwks(t, ed, es, rs)), nil, 3},
		{"Kubernetes' shape (use, alg, kid, n, e)", string(jwks(t, rs)), nil, 1},
		{"other top-level members ignored", `{"keys":[` + edJWK + `],"x":1}`, nil, 1},
		{"an enc key skipped", `{"keys":[` + edJWK + `,` + strings.Replace(string(es.jwk(t)), `"use":"sig"`, `"use":"enc"`, 1) + `]}`, nil, 1},
		{"P-384 skipped", `{"keys":[` + edJWK + `,` + string(p384JWK) + `]}`, nil, 1},
		{"unknown kty skipped", `{"keys":[` + edJWK + `,{"kty":"AKP","alg":"ML-DSA-44","pub":"AA"}]}`, nil, 1},
		{"private key", `{"keys":[` + private + `]}`, clientauth.ErrPrivateKey, 0},
		{"symmetric key", `{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`, clientauth.ErrPrivateKey, 0},
		{"D member, in capitals", `{"keys":[` + strings.Replace(edJWK, `{`, `{"D":"AA",`, 1) + `]}`, clientauth.ErrPrivateKey, 0},
		{"kty in two cases", `{"keys":[` + strings.Replace(edJWK, `{`, `{"KTY":"RSA",`, 1) + `]}`, clientauth.ErrJWKS, 0},
		{"d member on a public key", `{"keys":[` + strings.Replace(edJWK, `{`, `{"d":"AA",`, 1) + `]}`, clientauth.ErrPrivateKey, 0},
		{"RSA of 1024 bits", `{"keys":[` + string(smallJWK) + `]}`, clientauth.ErrJWKS, 0},
		{"RSA of 8200 bits", `{"keys":[` + string(hugeJWK) + `]}`, clientauth.ErrJWKS, 0},
		{"alg does not fit the key", `{"keys":[` + strings.Replace(edJWK, `"alg":"EdDSA"`, `"alg":"RS256"`, 1) + `]}`, clientauth.ErrJWKS, 0},
		{"alg HS256", `{"keys":[` + strings.Replace(edJWK, `"alg":"EdDSA"`, `"alg":"HS256"`, 1) + `]}`, clientauth.ErrJWKS, 0},
		{"kid twice", string(jwks(t, ed, ed)), clientauth.ErrJWKS, 0},
		{"member twice", `{"keys":[` + strings.Replace(edJWK, `{`, `{"kty":"OKP",`, 1) + `]}`, clientauth.ErrJWKS, 0},
		{"use other", `{"keys":[` + strings.Replace(edJWK, `"use":"sig"`, `"use":"x"`, 1) + `]}`, clientauth.ErrJWKS, 0},
		{"no kty", `{"keys":[{"x":"AA"}]}`, clientauth.ErrJWKS, 0},
		{"bad point", `{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}`, clientauth.ErrJWKS, 0},
		{"no usable key", `{"keys":[]}`, clientauth.ErrJWKS, 0},
		{"no keys member", `{}`, clientauth.ErrJWKS, 0},
		{"an array", `[]`, clientauth.ErrJWKS, 0},
		{"too many keys", `{"keys":[` + strings.Repeat(edJWK+",", clientauth.MaxKeys) + edJWK + `]}`, clientauth.ErrJWKS, 0},
		{"trailing garbage", `{"keys":[` + edJWK + `]} {}`, clientauth.ErrJWKS, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks, err := clientauth.ParseJWKS([]byte(tt.doc))
			if tt.want == nil {
				if err != nil || ks.Len() != tt.keys {
					t.Fatalf("ParseJWKS: %v; want %d keys", err, tt.keys)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("ParseJWKS: %v, want %v", err, tt.want)
			}
			if strings.Contains(err.Error(), `"d"`) && tt.want != clientauth.ErrPrivateKey {
				t.Errorf("error %q", err)
			}
		})
	}
}
