package dpop_test

import (
	"context"
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
