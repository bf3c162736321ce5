package token

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/snowtoken/snowtoken/token/clients"
	"github.com/snowtoken/snowtoken/token/keyset"
)

// TestVersions shows the version of a clients file and of a list of key
// files: the short SHA-256 of the bytes read, which changes with them.
func TestVersions(t *testing.T) {
	short := func(data ...[]byte) string {
		h := sha256.New()
		for _, d := range data {
			h.Write(d)
		}
		return hex.EncodeToString(h.Sum(nil))[:12]
	}
	doc := []byte(`{"clients": [{"id": "svc", "secret_sha256": "` + strings.Repeat("ab", 32) + `", "scopes": ["read"]}]}`)
	path := WriteFile(t, "clients.json", doc)
	cs, err := clients.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cs.Version(), short(doc); got != want {
		t.Errorf("Clients.Version = %q, want %q", got, want)
	}
	if err := os.WriteFile(path, append(doc, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	cs2, err := clients.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cs2.Version() == cs.Version() {
		t.Errorf("after a change: Version = %q, want other than %q", cs2.Version(), cs.Version())
	}

	a, b := MustKey(t), MustKey(t)
	pa, _ := a.MarshalPEM()
	pb, _ := b.MarshalPEM()
	ks, err := keyset.Load(WriteFile(t, "a.pem", pa), WriteFile(t, "b.pem", pb))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ks.Version(), short(pa, pb); got != want {
		t.Errorf("keyset.Set.Version = %q, want %q", got, want)
	}
	if mem, _ := keyset.New(a); mem.Version() != "" {
		t.Errorf("a set made in memory has version %q, want none", mem.Version())
	}
}
