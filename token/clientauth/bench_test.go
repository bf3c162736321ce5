package clientauth_test

import (
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/snowtoken/snowtoken/internal/clocktest"
	"github.com/snowtoken/snowtoken/token/clientauth"
)

// BenchmarkVerify is the cost of checking one private_key_jwt assertion of
// each algorithm (an inline key set, the replay record in memory): what
// private_key_jwt adds to an issue over a secret's SHA-256.
func BenchmarkVerify(b *testing.B) {
	for _, alg := range clientauth.Algorithms {
		b.Run(alg, func(b *testing.B) {
			clock := clocktest.New(t0)
			v := newVerifier(b, clock, clientauth.FetchOptions{})
			s := newSigner(b, alg, "k")
			reg := clientauth.Registration{ClientID: "gw", Keys: keySet(b, s)}
			assertions := make([]string, 1024)
			for i := range assertions {
				c := claimsFor("gw")
				c["jti"] = jwt.NewNumericDate(t0).String() + "-" + randomID()
				assertions[i] = s.sign(b, c)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%len(assertions) == 0 && i > 0 {
					b.StopTimer()
					v = newVerifier(b, clock, clientauth.FetchOptions{}) // the jti are spent
					b.StartTimer()
				}
				if err := v.Verify(b.Context(), reg, assertions[i%len(assertions)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSignature is one signature check of each algorithm alone, the
// floor of BenchmarkVerify.
func BenchmarkSignature(b *testing.B) {
	for _, alg := range clientauth.Algorithms {
		b.Run(alg, func(b *testing.B) {
			s := newSigner(b, alg, "k")
			tok := s.sign(b, claimsFor("gw"))
			i := strings.LastIndexByte(tok, '.')
			sig, err := jwt.NewParser().DecodeSegment(tok[i+1:])
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if err := s.method.Verify(tok[:i], sig, s.priv.Public()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
