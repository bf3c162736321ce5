package keyset_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/token/keyset"
	"github.com/snowtoken/snowtoken/token/keyset/keysettest"
)

func TestLoadKeyDir(t *testing.T) {
	f := keysettest.NewDir(t, time.Now())
	dir := f.Write(t)
	ks, err := keyset.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ks.SigningKeyID(), f.Files["cur.pem"].ID; got != want {
		t.Errorf("SigningKeyID = %q, want the active key's %q", got, want)
	}
	var got []string
	for _, k := range ks.Keys() {
		got = append(got, string(k.State)+" "+k.Kid)
	}
	want := []string{"active " + f.Files["cur.pem"].ID, "next " + f.Files["new.pem"].ID, "retired " + f.Files["old.pem"].ID}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Keys = %v, want %v (active, next, retired)", got, want)
	}
	// Keys tells the manifest's times, as the key metrics export them.
	byKid := map[string]keyset.Entry{}
	for _, e := range f.Manifest.Keys {
		byKid[e.Kid] = e
	}
	for _, k := range ks.Keys() {
		e := byKid[k.Kid]
		if !k.Published.Equal(e.Published) || !k.Activated.Equal(e.Activated) || !k.Retired.Equal(e.Retired) {
			t.Errorf("Keys: %s published %v, activated %v, retired %v; want the manifest's %v, %v, %v",
				k.Kid, k.Published, k.Activated, k.Retired, e.Published, e.Activated, e.Retired)
		}
	}
	if n := len(ks.JWKS().Keys); n != 3 {
		t.Errorf("JWKS has %d keys, want all 3", n)
	}
	data, err := os.ReadFile(filepath.Join(dir, keyset.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if got, want := ks.Version(), hex.EncodeToString(sum[:])[:12]; got != want {
		t.Errorf("Version = %q, want the manifest's short sha256 %q", got, want)
	}

	t.Run("first key born active", func(t *testing.T) {
		now := time.Now()
		k := keysettest.MustKey(t)
		first := &keysettest.Dir{Files: map[string]keyset.Key{"k.pem": k}, Manifest: keyset.Manifest{Keys: []keyset.Entry{
			{File: "k.pem", Kid: k.ID, State: keyset.Active, Published: now, Activated: now},
		}}}
		if _, err := keyset.LoadDir(first.Write(t)); err != nil {
			t.Errorf("a key activated when published (a new set): %v", err)
		}
	})
}

func TestLoadKeyDirRefuses(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name     string
		edit     func(f *keysettest.Dir, dir string)
		mentions string
	}{
		{"two active keys", func(f *keysettest.Dir, _ string) {
			f.Manifest.Keys[1].State = keyset.Active
			f.Manifest.Keys[1].Activated = now
			f.Manifest.Keys[1].Published = now.Add(-time.Hour)
		}, "2 active keys"},
		{"no active key", func(f *keysettest.Dir, _ string) {
			f.Manifest.Keys[2].State, f.Manifest.Keys[2].Activated = keyset.Next, time.Time{}
		}, "0 active keys"},
		{"activated too soon after publishing", func(f *keysettest.Dir, _ string) {
			f.Manifest.Keys[2].Activated = f.Manifest.Keys[2].Published.Add(keyset.PublishDelay - time.Second)
		}, "keep it next until"},
		{"active key with no activated time", func(f *keysettest.Dir, _ string) { f.Manifest.Keys[2].Activated = time.Time{} }, "activated time"},
		{"retired key with no retired time", func(f *keysettest.Dir, _ string) { f.Manifest.Keys[0].Retired = time.Time{} }, "retired time"},
		{"no published time", func(f *keysettest.Dir, _ string) { f.Manifest.Keys[1].Published = time.Time{} }, "published is required"},
		{"unknown state", func(f *keysettest.Dir, _ string) { f.Manifest.Keys[1].State = "passive" }, `"passive"`},
		{"kid not the file's", func(f *keysettest.Dir, _ string) { f.Manifest.Keys[1].Kid = f.Files["old.pem"].ID }, "new.pem holds the key"},
		{"same key twice", func(f *keysettest.Dir, _ string) {
			f.Manifest.Keys[1].File, f.Manifest.Keys[1].Kid = "old.pem", f.Files["old.pem"].ID
		}, "listed twice"},
		{"a path, not a file name", func(f *keysettest.Dir, _ string) { f.Manifest.Keys[1].File = "../new.pem" }, "not a path"},
		{"a hidden name", func(f *keysettest.Dir, _ string) { f.Manifest.Keys[1].File = "..data" }, "hidden"},
		{"missing key file", func(f *keysettest.Dir, _ string) { delete(f.Files, "new.pem") }, "new.pem"},
		{"next key public only", func(f *keysettest.Dir, _ string) {
			f.Files["new.pem"] = keysettest.PublicOnly(t, f.Files["new.pem"])
		}, "must be a PRIVATE KEY"},
		{"active key public only", func(f *keysettest.Dir, _ string) {
			f.Files["cur.pem"] = keysettest.PublicOnly(t, f.Files["cur.pem"])
		}, "must be a PRIVATE KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := keysettest.NewDir(t, now)
			tc.edit(f, "")
			_, err := keyset.LoadDir(f.Write(t))
			if !errors.Is(err, keyset.ErrKey) || !strings.Contains(err.Error(), tc.mentions) {
				t.Errorf("keyset.LoadDir: err = %v, want keyset.ErrKey naming %q", err, tc.mentions)
			}
			if err != nil && !strings.Contains(err.Error(), keyset.ManifestFile) && !strings.Contains(err.Error(), ".pem") {
				t.Errorf("keyset.LoadDir: err = %v names no file", err)
			}
		})
	}

	for name, doc := range map[string]string{
		"unknown member":  `{"keys": [], "signing": "x"}`,
		"member case":     `{"KEYS": []}`,
		"second document": `{"keys": []} {"keys": []}`,
		"no manifest":     "",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if doc != "" {
				if err := os.WriteFile(filepath.Join(dir, keyset.ManifestFile), []byte(doc), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := keyset.LoadDir(dir); !errors.Is(err, keyset.ErrKey) || !strings.Contains(err.Error(), keyset.ManifestFile) {
				t.Errorf("keyset.LoadDir: err = %v, want keyset.ErrKey naming %s", err, keyset.ManifestFile)
			}
		})
	}
}

// TestLoadKeyDirTombstones: a tombstone needs a kid and a time, and names
// a key neither listed nor dropped twice.
func TestLoadKeyDirTombstones(t *testing.T) {
	now := time.Now()
	for name, dropped := range map[string]func(f *keysettest.Dir) []keyset.DroppedKey{
		"no kid":  func(*keysettest.Dir) []keyset.DroppedKey { return []keyset.DroppedKey{{Dropped: now}} },
		"no time": func(*keysettest.Dir) []keyset.DroppedKey { return []keyset.DroppedKey{{Kid: "x"}} },
		"listed": func(f *keysettest.Dir) []keyset.DroppedKey {
			return []keyset.DroppedKey{{Kid: f.Files["old.pem"].ID, Dropped: now}}
		},
		"twice": func(*keysettest.Dir) []keyset.DroppedKey {
			return []keyset.DroppedKey{{Kid: "x", Dropped: now}, {Kid: "x", Dropped: now}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := keysettest.NewDir(t, now)
			f.Manifest.Dropped = dropped(f)
			if _, err := keyset.LoadDir(f.Write(t)); !errors.Is(err, keyset.ErrKey) {
				t.Errorf("keyset.LoadDir = %v, want keyset.ErrKey", err)
			}
		})
	}
}
