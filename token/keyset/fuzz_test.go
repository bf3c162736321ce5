package keyset_test

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"testing"

	. "github.com/snowtoken/snowtoken/token/keyset"
	. "github.com/snowtoken/snowtoken/token/keyset/keysettest"
)

// FuzzParseKeyPEM feeds ParsePEM arbitrary bytes. A refusal wraps ErrKey;
// a key it accepts is an Ed25519 key whose kid is its thumbprint, whose
// private half (if any) signs what the public half verifies, and which
// survives MarshalPEM and ParsePEM unchanged.
func FuzzParseKeyPEM(f *testing.F) {
	k := MustKey(f)
	priv, err := k.MarshalPEM()
	if err != nil {
		f.Fatal(err)
	}
	pub, err := Key{ID: k.ID, Public: k.Public}.MarshalPEM()
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range [][]byte{priv, pub, append([]byte("junk\n"), priv...), append(pub, priv...), priv[:len(priv)/2]} {
		f.Add(s)
	}
	for _, s := range otherPEMs(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParsePEM(data)
		if err != nil {
			if !errors.Is(err, ErrKey) {
				t.Fatalf("ParsePEM: %v, which is not ErrKey", err)
			}
			return
		}
		if len(k.Public) != ed25519.PublicKeySize || k.ID != Thumbprint(k.Public) {
			t.Fatalf("key %q with a %d-byte public key", k.ID, len(k.Public))
		}
		if k.Private != nil {
			if !k.Public.Equal(k.Private.Public()) {
				t.Fatal("the public key is not the private key's")
			}
			msg := []byte("snowtoken")
			if !ed25519.Verify(k.Public, msg, ed25519.Sign(k.Private, msg)) {
				t.Fatal("the private key signs what the public key does not verify")
			}
		}
		out, err := k.MarshalPEM()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParsePEM(out)
		if err != nil || back.ID != k.ID || !back.Public.Equal(k.Public) || !bytes.Equal(back.Private, k.Private) {
			t.Fatalf("MarshalPEM and ParsePEM: %+v, %v; want %+v", back, err, k)
		}
	})
}
