// Package keysettest makes signing keys for tests: the one MustKey of the
// root module; PublicOnly, a key's public half as a PUBLIC KEY file reads;
// and Dir, a keys directory in the middle of a rotation. Tests only.
package keysettest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/token/keyset"
)

// MustKey returns a new Ed25519 key, or fails tb.
func MustKey(tb testing.TB) keyset.Key {
	tb.Helper()
	k, err := keyset.Generate()
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// PublicOnly returns k without its private half, as keyset.ParsePEM reads
// a "PUBLIC KEY" file, or fails tb.
func PublicOnly(tb testing.TB, k keyset.Key) keyset.Key {
	tb.Helper()
	p, err := (keyset.Key{ID: k.ID, Public: k.Public}).MarshalPEM()
	if err != nil {
		tb.Fatal(err)
	}
	pub, err := keyset.ParsePEM(p)
	if err != nil {
		tb.Fatal(err)
	}
	if pub.Private != nil {
		tb.Fatal("a PUBLIC KEY PEM parsed with a private key")
	}
	return pub
}

// Dir is a keys directory's keys by file name, and its manifest.
type Dir struct {
	Files    map[string]keyset.Key
	Manifest keyset.Manifest
}

// NewDir is a rotation under way: a retired key, the active key
// published keyset.PublishDelay before it was activated, and a next key.
func NewDir(tb testing.TB, now time.Time) *Dir {
	tb.Helper()
	f := &Dir{Files: map[string]keyset.Key{"old.pem": MustKey(tb), "cur.pem": MustKey(tb), "new.pem": MustKey(tb)}}
	f.Manifest.Keys = []keyset.Entry{
		{File: "old.pem", Kid: f.Files["old.pem"].ID, State: keyset.Retired, Published: now.Add(-48 * time.Hour), Activated: now.Add(-48 * time.Hour), Retired: now.Add(-time.Hour)},
		{File: "new.pem", Kid: f.Files["new.pem"].ID, State: keyset.Next, Published: now.Add(-time.Minute)},
		{File: "cur.pem", Kid: f.Files["cur.pem"].ID, State: keyset.Active, Published: now.Add(-2 * time.Hour), Activated: now.Add(-time.Hour)},
	}
	return f
}

// Write writes the fixture to a new directory and returns it.
func (f *Dir) Write(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	for name, k := range f.Files {
		p, err := k.MarshalPEM()
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), p, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	m, err := json.Marshal(f.Manifest)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, keyset.ManifestFile), m, 0o600); err != nil {
		tb.Fatal(err)
	}
	return dir
}
