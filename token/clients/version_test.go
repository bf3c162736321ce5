package clients

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// TestVersion shows the version of a clients file: the short SHA-256 of
// the bytes read, which changes with them.
func TestVersion(t *testing.T) {
	doc := []byte(`{"clients": [{"id": "svc", "secret_sha256": "` + strings.Repeat("ab", 32) + `", "scopes": ["read"]}]}`)
	path := WriteFile(t, "clients.json", doc)
	cs, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(doc)
	if got, want := cs.Version(), hex.EncodeToString(sum[:])[:12]; got != want {
		t.Errorf("Version = %q, want %q", got, want)
	}
	if err := os.WriteFile(path, append(doc, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	cs2, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cs2.Version() == cs.Version() {
		t.Errorf("after a change: Version = %q, want other than %q", cs2.Version(), cs.Version())
	}
}
