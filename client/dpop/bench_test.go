package dpop_test

import (
	"context"
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/client/dpop"
)

func BenchmarkCheck(b *testing.B) {
	for _, s := range []*signer{newEd25519(b), newP256(b)} {
		b.Run(s.alg, func(b *testing.B) {
			c := checker(b, dpop.Options{Replay: neverSeen{}})
			proof := s.proof(b, claims(), nil)
			for b.Loop() {
				if _, err := c.Check(context.Background(), proof, post(), testNow); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSignatureAlone is the signature check alone of BenchmarkCheck's
// EdDSA proof (crypto/ed25519), the floor of what Check can cost.
func BenchmarkSignatureAlone(b *testing.B) {
	s := newEd25519(b)
	proof := s.proof(b, claims(), nil)
	i := strings.LastIndexByte(proof, '.')
	sig, err := b64.DecodeString(proof[i+1:])
	if err != nil {
		b.Fatal(err)
	}
	pub := s.priv.Public().(ed25519.PublicKey)
	for b.Loop() {
		if !ed25519.Verify(pub, []byte(proof[:i]), sig) {
			b.Fatal("does not verify")
		}
	}
}
