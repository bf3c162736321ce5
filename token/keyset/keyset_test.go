package keyset_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/internal/filetest"
	. "github.com/snowtoken/snowtoken/token/keyset"
	. "github.com/snowtoken/snowtoken/token/keyset/keysettest"
)

// WriteFile is filetest.Write.
var WriteFile = filetest.Write

func TestKeyPEMRoundTrip(t *testing.T) {
	k := MustKey(t)
	if got, want := k.ID, Thumbprint(k.Public); got != want {
		t.Fatalf("Generate kid = %q, want the thumbprint %q", got, want)
	}
	t.Run("private", func(t *testing.T) {
		p, err := k.MarshalPEM()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(p, []byte("-----BEGIN PRIVATE KEY-----")) {
			t.Fatalf("MarshalPEM of a private key:\n%s\nwant a PRIVATE KEY block", p)
		}
		got, err := ParsePEM(p)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != k.ID {
			t.Errorf("kid = %q, want %q", got.ID, k.ID)
		}
		if !got.Public.Equal(k.Public) || !got.Private.Equal(k.Private) {
			t.Error("the parsed key differs from the one marshalled")
		}
	})
	t.Run("public", func(t *testing.T) {
		pub := PublicOnly(t, k)
		if pub.ID != k.ID {
			t.Errorf("kid = %q, want %q", pub.ID, k.ID)
		}
		if !pub.Public.Equal(k.Public) {
			t.Error("the parsed public key differs from the one marshalled")
		}
	})
}

// TestThumbprintRFC8037 checks the example of RFC 8037 Appendix A.3.
func TestThumbprintRFC8037(t *testing.T) {
	x, err := base64.RawURLEncoding.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Thumbprint(ed25519.PublicKey(x)), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Errorf("Thumbprint = %q, want %q", got, want)
	}
}

func TestNewKeySet(t *testing.T) {
	signer, old := MustKey(t), MustKey(t)
	oldPub := PublicOnly(t, old)

	for _, tc := range []struct {
		name string
		keys []Key
	}{
		{"none", nil},
		{"public key first", []Key{oldPub}},
		{"public key before the private one", []Key{oldPub, signer}},
		// 32 bytes that x509 parses as an Ed25519 key but that are no
		// point of the curve (y = 2): refused when the set is made, not
		// found out by every token failing to verify.
		{"public key off the curve", []Key{signer, {ID: "off-curve", Public: append([]byte{2}, make([]byte, 31)...)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.keys...); !errors.Is(err, ErrKey) {
				t.Errorf("New: err = %v, want ErrKey", err)
			}
		})
	}

	ks, err := New(signer, oldPub)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ks.SigningKeyID(), signer.ID; got != want {
		t.Errorf("SigningKeyID = %q, want %q", got, want)
	}
	// The verify-only key verifies what its private half signed.
	pub, ok := ks.Lookup(old.ID)
	if !ok {
		t.Fatalf("lookup(%q): the verify-only key is missing", old.ID)
	}
	msg := []byte("signed by the retired key")
	if !ed25519.Verify(pub.Public, msg, ed25519.Sign(old.Private, msg)) {
		t.Error("the verify-only key does not verify its private half's signature")
	}
	if _, ok := ks.Lookup("no such kid"); ok {
		t.Error("lookup of an unknown kid succeeded")
	}
}

// otherPEMs returns PEM files that hold keys other than Ed25519, and garbage.
func otherPEMs(tb testing.TB) map[string][]byte {
	tb.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		tb.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	der := func(b []byte, err error) []byte {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	block := func(typ string, der []byte) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	}
	return map[string][]byte{
		"RSA PKCS8 private":   block("PRIVATE KEY", der(x509.MarshalPKCS8PrivateKey(rsaKey))),
		"RSA PKCS1 private":   block("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)),
		"RSA public":          block("PUBLIC KEY", der(x509.MarshalPKIXPublicKey(&rsaKey.PublicKey))),
		"EC PKCS8 private":    block("PRIVATE KEY", der(x509.MarshalPKCS8PrivateKey(ecKey))),
		"EC SEC1 private":     block("EC PRIVATE KEY", der(x509.MarshalECPrivateKey(ecKey))),
		"EC public":           block("PUBLIC KEY", der(x509.MarshalPKIXPublicKey(&ecKey.PublicKey))),
		"certificate block":   block("CERTIFICATE", []byte("not a certificate")),
		"garbage in a block":  block("PRIVATE KEY", []byte("not DER at all")),
		"garbage public":      block("PUBLIC KEY", []byte{0x30, 0x03, 0x02, 0x01}),
		"no PEM block":        []byte("hello, I am not a key\n"),
		"empty":               nil,
		"truncated PEM block": []byte("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA"),
	}
}

func TestParseKeyPEMRejects(t *testing.T) {
	for name, data := range otherPEMs(t) {
		t.Run(name, func(t *testing.T) {
			k, err := ParsePEM(data)
			if !errors.Is(err, ErrKey) {
				t.Errorf("ParsePEM: key %q, err = %v, want ErrKey", k.ID, err)
			}
		})
	}
}

func TestLoadKeySet(t *testing.T) {
	signer, old := MustKey(t), MustKey(t)
	signerPEM, err := signer.MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	oldPubPEM, err := (Key{ID: old.ID, Public: old.Public}).MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	signerPath := WriteFile(t, "signer.pem", signerPEM)
	oldPath := WriteFile(t, "old.pub.pem", oldPubPEM)

	ks, err := Load(signerPath, oldPath)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ks.SigningKeyID(), signer.ID; got != want {
		t.Errorf("SigningKeyID = %q, want %q", got, want)
	}
	if _, ok := ks.Lookup(old.ID); !ok {
		t.Errorf("the verify-only key %q is not in the set", old.ID)
	}

	missing := filepath.Join(t.TempDir(), "missing.pem")
	rsaPath := WriteFile(t, "rsa.pem", otherPEMs(t)["RSA PKCS8 private"])
	for _, tc := range []struct {
		name     string
		paths    []string
		mentions string // the error must name this file
	}{
		{"missing file", []string{missing}, missing},
		{"missing second file", []string{signerPath, missing}, missing},
		{"RSA key", []string{rsaPath}, rsaPath},
		{"public key first", []string{oldPath, signerPath}, ""},
		{"no files", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.paths...)
			if !errors.Is(err, ErrKey) {
				t.Fatalf("Load: err = %v, want ErrKey", err)
			}
			if !strings.Contains(err.Error(), tc.mentions) {
				t.Errorf("Load: err = %q, want it to name %q", err, tc.mentions)
			}
		})
	}
}

func TestJWKSHasNoPrivateMaterial(t *testing.T) {
	signer, old := MustKey(t), MustKey(t)
	ks, err := New(signer, old)
	if err != nil {
		t.Fatal(err)
	}
	set := ks.JWKS()
	if got, want := len(set.Keys), 2; got != want {
		t.Fatalf("JWKS has %d keys, want %d", got, want)
	}
	for i, k := range []Key{signer, old} {
		want := JWK{
			Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(k.Public),
			Kid: k.ID, Use: "sig", Alg: "EdDSA",
		}
		if got := set.Keys[i]; got != want {
			t.Errorf("JWKS key %d = %+v, want %+v", i, got, want)
		}
	}

	js, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	for i, k := range doc.Keys {
		if _, ok := k["d"]; ok {
			t.Errorf("JWKS key %d has a private member d: %s", i, js)
		}
		if got, want := len(k), 6; got != want {
			t.Errorf("JWKS key %d has %d members, want %d (kty crv x kid use alg): %s", i, got, want, js)
		}
	}
	for _, k := range []Key{signer, old} {
		for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding} {
			if seed := enc.EncodeToString(k.Private.Seed()); strings.Contains(string(js), seed) {
				t.Errorf("JWKS holds the private seed of %q: %s", k.ID, js)
			}
		}
	}
}
