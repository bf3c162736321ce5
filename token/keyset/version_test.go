package keyset_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
)

// TestVersion shows the version of a set loaded from a list of key files:
// the short SHA-256 of the bytes read; a set made in memory has none.
func TestVersion(t *testing.T) {
	a, b := keysettest.MustKey(t), keysettest.MustKey(t)
	pa, _ := a.MarshalPEM()
	pb, _ := b.MarshalPEM()
	ks, err := keyset.Load(WriteFile(t, "a.pem", pa), WriteFile(t, "b.pem", pb))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	h.Write(pa)
	h.Write(pb)
	if got, want := ks.Version(), hex.EncodeToString(h.Sum(nil))[:12]; got != want {
		t.Errorf("Version = %q, want %q", got, want)
	}
	if mem, _ := keyset.New(a); mem.Version() != "" {
		t.Errorf("a set made in memory has version %q, want none", mem.Version())
	}
}
