// Package edverify verifies Ed25519 signatures (RFC 8032, pure Ed25519) under
// a public key decoded once.
//
// crypto/ed25519.Verify decodes the 32-byte public key into a curve point on
// every call: a square root in the field, about 3 µs of the 43 µs a
// verification takes on the machines BENCHMARKS.md was measured on
// (BenchmarkVerify here). An issuer verifies every never-seen token under
// one of a handful of keys, so Key decodes its point once and each Verify
// does the rest of crypto/ed25519's steps, in its order, with the same
// well-kept field and group arithmetic (filippo.io/edwards25519, from which
// Go's own copy is taken). FuzzVerify holds the two to the same verdicts.
//
// Under FIPS 140-3 mode (GODEBUG=fips140=on) Verify calls crypto/ed25519,
// whose module is the validated one.
package edverify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/fips140"
	"crypto/sha512"
	"errors"

	"filippo.io/edwards25519"
)

// ErrPublicKey is NewKey's error for bytes that are not an Ed25519 public
// key: a wrong length, or no point of the curve.
var ErrPublicKey = errors.New("edverify: not an Ed25519 public key")

// Key is an Ed25519 public key with its point decoded and negated, ready
// for Verify. It is safe for concurrent use.
type Key struct {
	pub    ed25519.PublicKey
	minusA edwards25519.Point
}

// NewKey decodes pub once.
func NewKey(pub ed25519.PublicKey) (*Key, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, ErrPublicKey
	}
	var a edwards25519.Point
	if _, err := a.SetBytes(pub); err != nil {
		return nil, ErrPublicKey
	}
	k := &Key{pub: bytes.Clone(pub)}
	k.minusA.Negate(&a)
	return k, nil
}

// Verify reports whether sig is a valid signature of message by k, with
// crypto/ed25519.Verify's verdict for every input.
func (k *Key) Verify(message, sig []byte) bool {
	if fips140.Enabled() {
		return ed25519.Verify(k.pub, message, sig)
	}
	if len(sig) != ed25519.SignatureSize || sig[63]&224 != 0 {
		return false
	}
	h := sha512.New()
	h.Write(sig[:32])
	h.Write(k.pub)
	h.Write(message)
	var digest [sha512.Size]byte
	kk, err := edwards25519.NewScalar().SetUniformBytes(h.Sum(digest[:0]))
	if err != nil {
		return false // unreachable: a SHA-512 digest is 64 bytes
	}
	s, err := edwards25519.NewScalar().SetCanonicalBytes(sig[32:])
	if err != nil {
		return false
	}
	// [S]B = R + [k]A  ⇔  [k](-A) + [S]B = R
	r := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(kk, &k.minusA, s)
	return bytes.Equal(sig[:32], r.Bytes())
}
