package jwk_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/jwk"
)

var b64 = base64.RawURLEncoding

// keys are test keys of each type, with their JWKs.
type keys struct {
	ed, ec, rs, rs1024, p384 string
	rsaPub                   *rsa.PublicKey
	x5c                      string // the base64 DER of a certificate of rs
}

func newKeys(t testing.TB) keys {
	t.Helper()
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecRaw, _ := ecKey.PublicKey.Bytes()
	rsKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384Raw, _ := p384.PublicKey.Bytes()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "k"}, NotBefore: time.Unix(0, 0), NotAfter: time.Unix(1<<31, 0)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &rsKey.PublicKey, rsKey)
	if err != nil {
		t.Fatal(err)
	}
	rsa := func(pub *rsa.PublicKey, kid string) string {
		return `{"kty":"RSA","kid":"` + kid + `","n":"` + b64.EncodeToString(pub.N.Bytes()) + `","e":"AQAB"}`
	}
	return keys{
		ed:     `{"kty":"OKP","crv":"Ed25519","kid":"ed","x":"` + b64.EncodeToString(edPub) + `"}`,
		ec:     `{"kty":"EC","crv":"P-256","kid":"ec","x":"` + b64.EncodeToString(ecRaw[1:33]) + `","y":"` + b64.EncodeToString(ecRaw[33:]) + `"}`,
		rs:     rsa(&rsKey.PublicKey, "rs"),
		rs1024: rsa(&small.PublicKey, "small"),
		p384:   `{"kty":"EC","crv":"P-384","kid":"p384","x":"` + b64.EncodeToString(p384Raw[1:49]) + `","y":"` + b64.EncodeToString(p384Raw[49:]) + `"}`,
		rsaPub: &rsKey.PublicKey,
		x5c:    base64.StdEncoding.EncodeToString(der),
	}
}

// with returns the JWK j with the members extra added first.
func with(j, extra string) string { return strings.Replace(j, "{", "{"+extra+",", 1) }

// TestParse: a key alone, for the algorithms of its reader.
func TestParse(t *testing.T) {
	k := newKeys(t)
	const x = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
	ed := `{"kty":"OKP","crv":"Ed25519","x":"` + x + `"}`
	for _, tc := range []struct {
		name, jwk string
		algs      []string
		want      error  // nil: accepted
		desc      string // the description, if not empty
	}{
		{"Ed25519", k.ed, nil, nil, ""},
		{"P-256", k.ec, nil, nil, ""},
		{"RSA", k.rs, nil, nil, ""},
		{"WebCrypto's members", with(ed, `"use":"sig","alg":"EdDSA","key_ops":["verify"],"ext":true,"kid":"k"`), []string{jwk.EdDSA}, nil, ""},
		{"RSA for EdDSA alone", k.rs, []string{jwk.EdDSA, jwk.ES256}, jwk.ErrKey, `jwk member "n" is not allowed`},
		{"d", with(ed, `"d":"AA"`), nil, jwk.ErrPrivateKey, "the jwk holds the private key member d: send the public key alone"},
		{"D", with(ed, `"D":"AA"`), nil, jwk.ErrPrivateKey, ""},
		{"oct", `{"kty":"oct","k":"c2VjcmV0"}`, nil, jwk.ErrPrivateKey, ""},
		{"oct without k", `{"kty":"oct"}`, nil, jwk.ErrPrivateKey, ""},
		{"unknown member", with(ed, `"x5u":"https://evil.example/k"`), nil, jwk.ErrKey, `jwk member "x5u" is not allowed`},
		{"member twice", with(ed, `"x":"`+x+`"`), nil, jwk.ErrKey, `jwk member "x" appears twice`},
		{"x a number", `{"kty":"OKP","crv":"Ed25519","x":1}`, nil, jwk.ErrKey, "jwk member x is not a string"},
		{"x null", `{"kty":"OKP","crv":"Ed25519","x":null}`, nil, jwk.ErrKey, "jwk member x is not a string"},
		{"x not base64url", strings.Replace(ed, x, x[:42]+"!", 1), nil, jwk.ErrKey, "jwk member x is not base64url"},
		{"x padded", strings.Replace(ed, x, x+"=", 1), nil, jwk.ErrKey, ""},
		{"x short", strings.Replace(ed, x, x[:40], 1), nil, jwk.ErrKey, ""},
		{"no kty", `{"crv":"Ed25519","x":"` + x + `"}`, nil, jwk.ErrKey, "jwk member kty is missing"},
		{"no x", `{"kty":"OKP","crv":"Ed25519"}`, nil, jwk.ErrKey, ""},
		{"X25519", `{"kty":"OKP","crv":"X25519","x":"` + x + `"}`, nil, jwk.ErrKey, ""},
		{"P-384", k.p384, nil, jwk.ErrKey, ""},
		{"Ed25519 identity", `{"kty":"OKP","crv":"Ed25519","x":"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`, nil, jwk.ErrKey, ""},
		{"EC off the curve", `{"kty":"EC","crv":"P-256","x":"l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs","y":"l8tFrhx-34tV3hRICRDY9zCkDlpBhF42UQUfWVAWBFs"}`, nil, jwk.ErrKey, "jwk members x and y are not a point on P-256"},
		{"RSA of 1024 bits", k.rs1024, nil, jwk.ErrKey, "RSA key of 1024 bits: want 2048 to 8192"},
		{"RSA exponent 1", strings.Replace(k.rs, `"e":"AQAB"`, `"e":"AQ"`, 1), nil, jwk.ErrKey, ""},
		{"RSA exponent even", strings.Replace(k.rs, `"e":"AQAB"`, `"e":"AQAA"`, 1), nil, jwk.ErrKey, ""},
		{"use enc", with(ed, `"use":"enc"`), nil, jwk.ErrKey, ""},
		{"key_ops sign", with(ed, `"key_ops":["verify","sign"]`), nil, jwk.ErrKey, ""},
		{"ext a string", with(ed, `"ext":"true"`), nil, jwk.ErrKey, "jwk member ext is not true or false"},
		{"alg of another kty", with(ed, `"alg":"ES256"`), nil, jwk.ErrKey, ""},
		{"alg HS256", with(ed, `"alg":"HS256"`), nil, jwk.ErrKey, ""},
		{"not an object", `["OKP"]`, nil, jwk.ErrKey, "the jwk is not a JSON object"},
		{"null", `null`, nil, jwk.ErrKey, ""},
		{"trailing data", ed + ` {}`, nil, jwk.ErrKey, "the jwk is not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, err := jwk.Parse([]byte(tc.jwk), tc.algs...)
			if tc.want == nil {
				if err != nil || key.Public == nil {
					t.Fatalf("Parse = %+v, %v", key, err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Parse = %+v, %v; want %v", key, err, tc.want)
			}
			if d, ok := jwk.Description(err); !ok || tc.desc != "" && d != tc.desc {
				t.Errorf("Description = %q, %v; want %q", d, ok, tc.desc)
			}
		})
	}
}

// TestParseSet: what a key set may hold, what is skipped, and what
// refuses it whole.
func TestParseSet(t *testing.T) {
	k := newKeys(t)
	set := func(keys ...string) string { return `{"keys":[` + strings.Join(keys, ",") + `]}` }
	for _, tc := range []struct {
		name string
		doc  string
		algs []string
		want error // nil: accepted
		keys int
	}{
		{"each type", set(k.ed, k.ec, k.rs), nil, nil, 3},
		{"other top-level members ignored", `{"keys":[` + k.ed + `],"x":1}`, nil, nil, 1},
		{"unknown members ignored", set(with(k.ed, `"x5t":"AA","ext":true`)), nil, nil, 1},
		{"x5c of the key", set(with(k.rs, `"x5c":["`+k.x5c+`"]`)), nil, nil, 1},
		{"an enc key skipped", set(k.ed, with(k.ec, `"use":"enc"`)), nil, nil, 1},
		{"P-384 skipped", set(k.ed, k.p384), nil, nil, 1},
		{"ES384 skipped", set(k.ed, with(k.p384, `"alg":"ES384"`)), nil, nil, 1},
		{"unknown kty skipped", set(k.ed, `{"kty":"AKP","alg":"ML-DSA-44","pub":"AA"}`), nil, nil, 1},
		{"types of other algs skipped", set(k.ed, k.ec, k.rs), []string{jwk.EdDSA}, nil, 1},
		{"alg of other algs skipped", set(k.ed, with(k.rs, `"alg":"PS256"`)), []string{jwk.EdDSA, jwk.RS256}, nil, 1},
		{"private key", set(with(k.ed, `"d":"AA"`)), nil, jwk.ErrPrivateKey, 0},
		{"private key of a skipped type", set(k.ed, with(k.rs, `"p":"AA"`)), []string{jwk.EdDSA}, jwk.ErrPrivateKey, 0},
		{"D in capitals", set(with(k.ed, `"D":"AA"`)), nil, jwk.ErrPrivateKey, 0},
		{"symmetric key", set(`{"kty":"oct","k":"c2VjcmV0"}`), nil, jwk.ErrPrivateKey, 0},
		{"kty in two cases", set(with(k.ed, `"KTY":"RSA"`)), nil, jwk.ErrSet, 0},
		{"RSA of 1024 bits", set(k.rs1024), nil, jwk.ErrSet, 0},
		{"x5c of another key", set(with(k.ec, `"x5c":["`+k.x5c+`"]`)), nil, jwk.ErrSet, 0},
		{"alg does not fit the key", set(with(k.ed, `"alg":"RS256"`)), nil, jwk.ErrSet, 0},
		{"alg HS256", set(with(k.ed, `"alg":"HS256"`)), nil, jwk.ErrSet, 0},
		{"kid twice", set(k.ed, strings.Replace(k.ec, `"kid":"ec"`, `"kid":"ed"`, 1)), nil, jwk.ErrSet, 0},
		{"kid twice, one skipped", set(k.ed, strings.Replace(k.ec, `"kid":"ec"`, `"kid":"ed"`, 1)), []string{jwk.EdDSA}, nil, 1},
		{"member twice", set(with(k.ed, `"kty":"OKP"`)), nil, jwk.ErrSet, 0},
		{"use other", set(with(k.ed, `"use":"x"`)), nil, jwk.ErrSet, 0},
		{"no kty", set(`{"x":"AA"}`), nil, jwk.ErrSet, 0},
		{"bad point", set(`{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}`), nil, jwk.ErrSet, 0},
		{"no usable key", set(k.rs), []string{jwk.EdDSA}, jwk.ErrSet, 0},
		{"empty", `{"keys":[]}`, nil, jwk.ErrSet, 0},
		{"no keys member", `{}`, nil, jwk.ErrSet, 0},
		{"an array", `[]`, nil, jwk.ErrSet, 0},
		{"too many keys", `{"keys":[` + strings.Repeat(k.ed+",", jwk.MaxKeys) + k.ed + `]}`, nil, jwk.ErrSet, 0},
		{"trailing garbage", set(k.ed) + ` {}`, nil, jwk.ErrSet, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := jwk.ParseSet([]byte(tc.doc), tc.algs...)
			if tc.want == nil {
				if err != nil || s.Len() != tc.keys {
					t.Fatalf("ParseSet: %v; want %d keys", err, tc.keys)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("ParseSet: %v, want %v", err, tc.want)
			}
			if _, ok := jwk.Description(err); !ok {
				t.Errorf("%v carries no description", err)
			}
		})
	}
}

// TestKeyFits: a key verifies its type's algorithms, and only its own alg
// if it names one.
func TestKeyFits(t *testing.T) {
	k := newKeys(t)
	s, err := jwk.ParseSet([]byte(`{"keys":[` + k.ed + `,` + with(k.rs, `"alg":"PS256"`) + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	ed, _ := s.ByID("ed")
	rs, _ := s.ByID("rs")
	if !ed.Fits(jwk.EdDSA) || ed.Fits(jwk.ES256) || !rs.Fits(jwk.PS256) || rs.Fits(jwk.RS256) {
		t.Errorf("Fits: ed %v %v, rs %v %v", ed.Fits(jwk.EdDSA), ed.Fits(jwk.ES256), rs.Fits(jwk.PS256), rs.Fits(jwk.RS256))
	}
	if !rs.Public.(*rsa.PublicKey).Equal(k.rsaPub) {
		t.Error("the RSA key read is not the key written")
	}
}
