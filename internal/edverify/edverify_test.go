package edverify

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"
)

var (
	pub, priv, _ = ed25519.GenerateKey(rand.Reader)
	message      = []byte("eyJhbGciOiJFZERTQSJ9.eyJqdGkiOiIxIn0")
)

func mustKey(tb testing.TB, pub ed25519.PublicKey) *Key {
	tb.Helper()
	k, err := NewKey(pub)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// TestVerify: the verdicts that matter, each against crypto/ed25519's.
func TestVerify(t *testing.T) {
	k := mustKey(t, pub)
	sig := ed25519.Sign(priv, message)
	other, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	flip := func(b []byte, i int) []byte { c := append([]byte(nil), b...); c[i] ^= 1; return c }
	// S + l: the same scalar, not canonical (RFC 8032 5.1.7 rejects it).
	nonCanonical := append([]byte(nil), sig...)
	l := [32]byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14, 31: 0x10}
	carry := 0
	for i := range 32 {
		v := int(nonCanonical[32+i]) + int(l[i]) + carry
		nonCanonical[32+i], carry = byte(v), v>>8
	}
	for _, tc := range []struct {
		name     string
		msg, sig []byte
		want     bool
	}{
		{"valid", message, sig, true},
		{"message changed", flip(message, 3), sig, false},
		{"R changed", message, flip(sig, 0), false},
		{"S changed", message, flip(sig, 40), false},
		{"S not canonical", message, nonCanonical, false},
		{"high bits of S", message, func() []byte { c := append([]byte(nil), sig...); c[63] |= 0x80; return c }(), false},
		{"another key's signature", message, ed25519.Sign(otherPriv, message), false},
		{"short", message, sig[:63], false},
		{"long", message, append(append([]byte(nil), sig...), 0), false},
		{"empty", message, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, std := k.Verify(tc.msg, tc.sig), ed25519.Verify(pub, tc.msg, tc.sig); got != tc.want || std != tc.want {
				t.Errorf("Verify %t, crypto/ed25519 %t; want %t", got, std, tc.want)
			}
		})
	}
	if !mustKey(t, other).Verify(message, ed25519.Sign(otherPriv, message)) {
		t.Error("a second key does not verify its own signature")
	}
}

func TestNewKeyRefuses(t *testing.T) {
	// y = 2 is on no point of the curve (x² has no square root).
	notOnCurve := make([]byte, 32)
	notOnCurve[0] = 2
	for name, b := range map[string][]byte{"short": pub[:31], "long": append(append([]byte(nil), pub...), 0), "not on the curve": notOnCurve} {
		if _, err := NewKey(b); !errors.Is(err, ErrPublicKey) {
			t.Errorf("%s: %v, want ErrPublicKey", name, err)
		}
	}
}

// FuzzVerify holds Verify to crypto/ed25519.Verify's verdict on any message
// and signature, valid ones mutated included, under two keys.
func FuzzVerify(f *testing.F) {
	sig := ed25519.Sign(priv, message)
	f.Add(message, sig, false)
	f.Add(message[:5], sig, false)
	f.Add([]byte{}, ed25519.Sign(priv, nil), false)
	f.Add(message, sig, true)
	other, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	k, ko := mustKey(f, pub), mustKey(f, other)
	f.Fuzz(func(t *testing.T, msg, sig []byte, sign bool) {
		if sign {
			// The fuzzer's message, signed: both must accept, and reject it
			// under the other key.
			sig = ed25519.Sign(otherPriv, msg)
		}
		if got, want := k.Verify(msg, sig), ed25519.Verify(pub, msg, sig); got != want {
			t.Fatalf("Verify %t, crypto/ed25519 %t (message %x, signature %x)", got, want, msg, sig)
		}
		if got, want := ko.Verify(msg, sig), ed25519.Verify(other, msg, sig); got != want {
			t.Fatalf("other key: Verify %t, crypto/ed25519 %t (message %x, signature %x)", got, want, msg, sig)
		}
	})
}

func BenchmarkVerify(b *testing.B) {
	sig := ed25519.Sign(priv, message)
	b.Run("crypto/ed25519", func(b *testing.B) {
		for b.Loop() {
			if !ed25519.Verify(pub, message, sig) {
				b.Fatal("rejected")
			}
		}
	})
	b.Run("Key", func(b *testing.B) {
		k := mustKey(b, pub)
		b.ReportAllocs()
		for b.Loop() {
			if !k.Verify(message, sig) {
				b.Fatal("rejected")
			}
		}
	})
}
